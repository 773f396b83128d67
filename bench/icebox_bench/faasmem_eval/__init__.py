"""FaaSMem's evaluation (ASPLOS '24 §8) as bench recipes: Fig. 12 (`faasmem-fig12`) and the
semi-warm period (`faasmem-semiwarm`, the shape of Fig. 13's timeline).

Pure analysis (tested on recorded samples): `loads.py` (the trace's high/low-load split and the
mapping onto benchmark functions), `local_memory.py` (time-averaged local memory per function),
`counters.py` (bytes offloaded and refaulted: events, instance counters, Prometheus),
`overheads.py` (barrier and step histograms, refault cost, daemon CPU, the kernel's own swap),
`fig12.py` and `semiwarm.py` (what summary.json holds). Protocol: `run.py` (one replay with its
own iceboxd, shared by both recipes), `probes.py` (the /metrics and kernel swap sampler),
`fig12_run.py`. Rendering: `fig12_render.py`, `semiwarm_render.py`.
"""
