"""Fig. 8 (Desiccant §5.2, "Effects on other metrics"): RSS and PSS per instance with 1…k
concurrent instances of one function, vanilla vs desiccant (every instance reclaimed).

With one instance, its runtime's libraries are private: the library page-out (§4.6) applies
and both RSS and PSS drop (the paper: 4.16× for fft). With more instances, the libraries are
shared: RSS per instance stays, PSS approaches USS as the shared pages are split k ways.

improvement = vanilla / desiccant of the mean per-instance figure.
"""

from __future__ import annotations

from ..units import MIB

MEASURES = ("rss", "pss", "uss")
PAPER_ONE_INSTANCE_IMPROVEMENT = 4.16


def mean_per_instance(memories: list[dict]) -> dict:
    """{rss_mb, pss_mb, uss_mb}: the mean over the instances, MiB."""
    if not memories:
        raise ValueError("no instance measured")
    return {f"{m}_mb": round(sum(x[m] for x in memories) / len(memories) / MIB, 3) for m in MEASURES}


def point(instances: int, vanilla: list[dict], desiccant: list[dict]) -> dict:
    """One x of Fig. 8 from the per-instance memories (bytes) of both modes."""
    if len(vanilla) != instances or len(desiccant) != instances:
        raise ValueError(f"{instances} instances expected, got {len(vanilla)} vanilla and {len(desiccant)} desiccant")
    v, d = mean_per_instance(vanilla), mean_per_instance(desiccant)
    if d["rss_mb"] <= 0 or d["pss_mb"] <= 0:
        raise ValueError("a desiccant memory figure is not positive")
    return {
        "instances": instances,
        "vanilla": v,
        "desiccant": d,
        "rss_improvement": round(v["rss_mb"] / d["rss_mb"], 4),
        "pss_improvement": round(v["pss_mb"] / d["pss_mb"], 4),
    }


def summary(function: str, iterations: int, points: list[dict]) -> dict:
    return {"function": function, "iterations": iterations, "points": sorted(points, key=lambda p: p["instances"])}
