"""icebox-bench: the benchmark harness for icebox (see docs/bench.md)."""

__version__ = "0.1.0"
