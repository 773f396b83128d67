"""Desiccant's evaluation (EuroSys '24 §5): Fig. 7, 8, 9–10 and 13 as bench recipes.

One module triple per figure: `figN.py` (pure analysis: what summary.json holds, tested on
synthetic data), `figN_run.py` (the protocol against a live iceboxd) and `figN_render.py`
(markdown tables and PNG plots). `actions.py` and `cpu.py` are shared by them.
"""
