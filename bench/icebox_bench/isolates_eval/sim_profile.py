"""The simulator's profile file (ISOLATES_SPEC §6), measured on a live node by
`icebox-bench profile SET --sim FILE`:

    {"version": 1, "source": "...", "functions": {F: {"cold_start_ms", "warm_ms",
      "sharing": {"process"|"shared"|"isolate": {"base_mb", "increment_mb"}},
      "idle_mb": {"none", "desiccant"}, "runs"}}}

The simulator charges an instance base + n × increment (icebox-policy MemoryProfile) and an
idle one its base (or idle_mb.desiccant once reclaimed). So:

* shared / isolate: the thesis fit of the action's memory at n = levels in flight in one
  instance (fit.py); base = the bound at n = 0 (the thesis' Base − increment), increment as fitted;
* process: one activation per instance, so base = the idle instance (idle_mb.none) and
  increment = what a running instance holds beyond it: ceil(max over levels of memory(n) / n − base);
* cold_start_ms: the cold invocation's client latency less the mean warm latency, averaged over
  `runs` cold starts (a new action version each); warm_ms: the mean activation duration of the
  warm invocations (what the simulator runs an invocation for);
* idle_mb: an instance after its warm invocations, frozen (none), then reclaimed by Desiccant
  through the node API, frozen again (desiccant).
"""

from __future__ import annotations

import math

from ..units import MIB
from . import fit as fitting

VERSION = 1


def sharing_entry(mode: str, peaks_mb: dict[int, float], idle_none_mb: float) -> dict:
    """{"base_mb", "increment_mb"} of one mode from its peaks {n: MiB}."""
    if not peaks_mb:
        raise ValueError(f"no memory measured in {mode} mode")
    if mode == "process":
        per_instance = max(v / n for n, v in peaks_mb.items())
        return {
            "base_mb": round(idle_none_mb, 3),
            "increment_mb": float(max(0, math.ceil(per_instance - idle_none_mb))),
        }
    f = fitting.fit(peaks_mb)
    return {"base_mb": round(f.base0_mb, 3), "increment_mb": float(f.increment_mb)}


def cold_start_ms(runs: list[dict]) -> float:
    """Mean of (cold latency − that run's mean warm latency) over the runs ({"cold_ms", "warm_ms": [...]})."""
    values = [r["cold_ms"] - sum(r["warm_ms"]) / len(r["warm_ms"]) for r in runs if r["warm_ms"]]
    if not values:
        raise ValueError("no cold start with warm invocations after it")
    return round(max(0.0, sum(values) / len(values)), 3)


def function_entry(
    *,
    runs: list[dict],
    warm_durations_ms: list[float],
    peaks: dict[str, dict[int, float]],
    idle_none: int,
    idle_desiccant: int,
) -> dict:
    """One function's profile; idle figures in bytes, peaks in MiB."""
    if not warm_durations_ms:
        raise ValueError("no warm invocation duration")
    none_mb = idle_none / MIB
    return {
        "cold_start_ms": cold_start_ms(runs),
        "warm_ms": round(sum(warm_durations_ms) / len(warm_durations_ms), 3),
        "sharing": {mode: sharing_entry(mode, p, none_mb) for mode, p in peaks.items()},
        "idle_mb": {"none": round(none_mb, 3), "desiccant": round(idle_desiccant / MIB, 3)},
        "runs": len(runs),
    }


def profile(source: str, functions: dict[str, dict]) -> dict:
    return {"version": VERSION, "source": source, "functions": functions}
