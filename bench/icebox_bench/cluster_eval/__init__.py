"""The `cluster` recipe's parts: the analysis (analysis.py, pure), the live cluster (nodes.py)
and its replay (replay.py)."""
