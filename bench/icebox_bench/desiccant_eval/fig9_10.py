"""Fig. 9 and 10 (Desiccant §5.3): an Azure trace replayed under a memory budget, per mode and
scale factor — cold-boot rate, throughput, tail latency and CPU.

Every figure is taken over the run's measured window (report/metrics.py: warm-up excluded,
from the first measured invocation's scheduled time to the last one's end). Per run:

* latency, cold-start rate, throughput: report/metrics.py's definitions;
* cpu: daemon + instances over the window (cpu.py), `cores` = CPU seconds / window seconds;
* evictions: `evicted` events in the window by reason (`memory_budget` is what the budget forced);
* reclaims: `reclaimed` events in the window, the memory they freed and the runtimes' CPU.

Per scale, desiccant against each baseline: cold-start ratio baseline / desiccant (the paper:
up to 4.49× vs vanilla), latency improvement 1 − desiccant / baseline at p90 / p95 / p99 (the
paper at scale 15: 33.1%, 9.8%, 37.5% vs vanilla), throughput gain desiccant / baseline − 1,
CPU ratio desiccant / baseline.
"""

from __future__ import annotations

import re
from collections import Counter

from ..units import GIB, MIB

PAPER_COLD_START_REDUCTION = 4.49
PAPER_CPUS = 20  # the artifact runs functions on CPUs 20-39
PAPER_CACHE_BYTES = 2 * GIB
TARGET_COLD_START_REDUCTION = 4.0
PERCENTILES = ("p90", "p95", "p99")

_FREED = re.compile(r"freed (\d+) bytes")
_CPU = re.compile(r"runtime cpu ([0-9.]+) ms")


def scaled_pool_bytes(cores: int) -> int:
    """The paper's 2 GiB instance cache for 20 function CPUs, kept per CPU: 2 GiB × cores / 20
    (204.8 MiB on a 2-core machine), rounded down to a whole MiB."""
    if cores < 1:
        raise ValueError("cores must be at least 1")
    return PAPER_CACHE_BYTES * cores // PAPER_CPUS // MIB * MIB


def scale_key(scale: float) -> str:
    return f"{scale:g}"


def window_events(events: list[dict], start_ms: float, end_ms: float) -> dict:
    """Evictions by reason and reclaims (count, MiB freed, runtime CPU s) inside the window."""
    evictions: Counter = Counter()
    reclaims, freed, cpu_ms = 0, 0, 0.0
    for e in events:
        t = e.get("time_ms")
        if t is None or t < start_ms or t > end_ms:
            continue
        if e.get("kind") == "evicted":
            evictions[e.get("detail") or "unknown"] += 1
        elif e.get("kind") == "reclaimed":
            reclaims += 1
            detail = e.get("detail") or ""
            if m := _FREED.search(detail):
                freed += int(m.group(1))
            if m := _CPU.search(detail):
                cpu_ms += float(m.group(1))
    return {
        "evictions": dict(sorted(evictions.items())),
        "reclaims": reclaims,
        "reclaimed_mib": round(freed / MIB, 3),
        "reclaim_cpu_s": round(cpu_ms / 1000.0, 3),
    }


def run_entry(metrics: dict, cpu: dict | None, events: dict) -> dict:
    """One (mode, scale) of summary.json from report.metrics' RunMetrics.to_json(), the window's
    CPU (cpu.window_cpu) and window_events."""
    latency = metrics.get("latency_ms") or {}
    return {
        "invocations": metrics["invocations"],
        "successes": metrics["successes"],
        "cold_starts": metrics["cold_starts"],
        "cold_start_rate": _round(metrics.get("cold_start_rate"), 4),
        "throughput_per_s": _round(metrics.get("throughput_per_s"), 3),
        "latency_ms": {p: _round(latency.get(p), 1) for p in ("p50", *PERCENTILES)},
        "window_s": round(metrics.get("window_s", 0.0), 3),
        "cpu": cpu,
        **events,
        "memory_mean_mib": _round(metrics.get("memory_mean_mib"), 1),
        "idle_gib_s": _round(metrics.get("idle_gib_s"), 3),
    }


def _round(value, digits: int):
    return None if value is None else round(value, digits)


def _ratio(a, b) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def compare(desiccant: dict, baseline: dict) -> dict:
    """Desiccant against one baseline at one scale."""
    out = {
        # None when desiccant had no cold start at all (the reduction is unbounded).
        "cold_start_reduction": _ratio(baseline.get("cold_start_rate"), desiccant.get("cold_start_rate")),
        "cold_start_rates": {
            "desiccant": desiccant.get("cold_start_rate"),
            "baseline": baseline.get("cold_start_rate"),
        },
        "throughput_gain": None,
        "latency_improvement": {},
        "cpu_ratio": _ratio((desiccant.get("cpu") or {}).get("total_s"), (baseline.get("cpu") or {}).get("total_s")),
    }
    if desiccant.get("throughput_per_s") is not None and baseline.get("throughput_per_s"):
        out["throughput_gain"] = round(desiccant["throughput_per_s"] / baseline["throughput_per_s"] - 1.0, 4)
    for p in PERCENTILES:
        d, b = desiccant["latency_ms"].get(p), baseline["latency_ms"].get(p)
        out["latency_improvement"][p] = round(1.0 - d / b, 4) if d is not None and b else None
    return out


def comparison(runs: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """Per scale: desiccant vs each baseline that ran at that scale, and whether vanilla was
    memory-bound there (the budget forced at least one eviction in its window)."""
    out: dict[str, dict] = {}
    desiccant = runs.get("desiccant", {})
    for scale, d in desiccant.items():
        entry: dict = {}
        vanilla = runs.get("vanilla", {}).get(scale)
        if vanilla is not None:
            entry["vanilla_memory_bound"] = vanilla["evictions"].get("memory_budget", 0) > 0
        for baseline in ("vanilla", "eager"):
            b = runs.get(baseline, {}).get(scale)
            if b is not None:
                entry[f"vs_{baseline}"] = compare(d, b)
        out[scale] = entry
    return out


def targets(comparison_: dict[str, dict]) -> list[dict]:
    """Issue 4: where vanilla is memory-bound, ≥4× fewer cold boots than vanilla and a better p99."""
    rows = []
    for scale, c in comparison_.items():
        if not c.get("vanilla_memory_bound") or "vs_vanilla" not in c:
            continue
        v = c["vs_vanilla"]
        reduction = v["cold_start_reduction"]
        rates = v["cold_start_rates"]
        none_left = rates["desiccant"] == 0 and bool(rates["baseline"])
        rows.append(
            {
                "scale": scale,
                "target": f"cold starts vanilla / desiccant >= {TARGET_COLD_START_REDUCTION}",
                "value": reduction,
                "met": none_left or (reduction is not None and reduction >= TARGET_COLD_START_REDUCTION),
            }
        )
        p99 = v["latency_improvement"].get("p99")
        rows.append(
            {"scale": scale, "target": "p99 better than vanilla", "value": p99, "met": p99 is not None and p99 > 0}
        )
    return rows


def summary(config: dict, runs: dict[str, dict[str, dict]]) -> dict:
    comp = comparison(runs)
    return {"config": config, "runs": runs, "comparison": comp, "targets": targets(comp)}
