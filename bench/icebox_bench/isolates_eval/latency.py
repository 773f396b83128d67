"""isolates-latency (thesis §4.3, Fig. 4.8): memalloc's latency per sharing mode and
concurrency, isolate start times, and the memory an isolate returns when torn down.

summary.json:

    {"function": "memalloc", "levels": [1, 2, 4, 8],
     "modes": {M: {"1": {"count", "failures", "latency_ms": {p50, p90, p99, max}, "duration_ms": {...}}, ...}},
     "p99_isolate_vs_shared": {"2": 0.41, ...},      # 1 − isolate p99 / shared p99 (positive: isolate better)
     "isolate_start_ms": {"pool_median", "fresh_median", ...} | null,   # idle node (the targets)
     "isolate_start_ms_loaded": {...} | null,    # the isolate instance after the levels
     "teardown": {"rss_reclaimed_mb", "rss_held_mb", "rss_after_mb", "held_mb", "returned", ...} | null,
     "targets": [{"target", "value", "met"}]}

Latency is client-side (the thesis measured with ab); the activation's own duration is kept
next to it.
"""

from __future__ import annotations

from ..stats import percentile
from ..units import MIB

TARGET_P99_GAIN = 0.30
TARGET_POOL_START_MS = 1.0
TARGET_FRESH_START_MS = 20.0
TARGET_RETURNED = 0.95


def _dist(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    return {
        "p50": round(percentile(values, 50), 3),
        "p90": round(percentile(values, 90), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }


def level_entry(records: list[dict]) -> dict:
    """One (mode, level) from its measured invocation records."""
    ok = [r for r in records if r.get("status") == "success"]
    return {
        "count": len(ok),
        "failures": len(records) - len(ok),
        "latency_ms": _dist([float(r["latency_ms"]) for r in ok]),
        "duration_ms": _dist([float(r["duration_ms"]) for r in ok if r.get("duration_ms") is not None]),
    }


def p99_gains(modes: dict[str, dict]) -> dict[str, float]:
    """Per level both modes ran: 1 − isolate p99 / shared p99."""
    iso, shared = modes.get("isolate") or {}, modes.get("shared") or {}
    out = {}
    for n in sorted(set(iso) & set(shared), key=int):
        a, b = iso[n]["latency_ms"]["p99"], shared[n]["latency_ms"]["p99"]
        if a is not None and b:
            out[n] = round(1.0 - a / b, 4)
    return out


def start_times(stats: dict | None) -> dict | None:
    """`sharing.isolates` of an instance's /stats: its start times and counters."""
    isolates = ((stats or {}).get("sharing") or {}).get("isolates")
    if not isinstance(isolates, dict):
        return None
    out = dict(isolates.get("start_ms") or {})
    for key in ("created", "torn_down", "crashed", "timed_out", "live", "pool_target"):
        if key in isolates:
            out[key] = isolates[key]
    return out


def teardown(rss_reclaimed: int, rss_held: int, rss_after: int, **extra) -> dict:
    """RSS (bytes) of the instance reclaimed with no isolate left, then with an isolate holding
    memory, then after that isolate was torn down (the same reclaim): the share of the held
    memory returned."""
    held = rss_held - rss_reclaimed
    return {
        "rss_reclaimed_mb": round(rss_reclaimed / MIB, 3),
        "rss_held_mb": round(rss_held / MIB, 3),
        "rss_after_mb": round(rss_after / MIB, 3),
        "held_mb": round(held / MIB, 3),
        "returned": round((rss_held - rss_after) / held, 4) if held > 0 else None,
        **extra,
    }


def targets(gains: dict[str, float], starts: dict | None, down: dict | None) -> list[dict]:
    rows = []
    multi = {n: g for n, g in gains.items() if int(n) >= 2}
    if multi:
        n, best = max(multi.items(), key=lambda kv: kv[1])
        rows.append(
            {
                "target": f"isolate p99 >= {TARGET_P99_GAIN:.0%} better than shared at some n >= 2",
                "value": best,
                "at": int(n),
                "met": best >= TARGET_P99_GAIN,
            }
        )
    if starts:
        for key, limit in (("pool_median", TARGET_POOL_START_MS), ("fresh_median", TARGET_FRESH_START_MS)):
            if starts.get(key) is not None:
                rows.append(
                    {
                        "target": f"isolate start {key} <= {limit:g} ms",
                        "value": starts[key],
                        "met": starts[key] <= limit,
                    }
                )
    if down and down.get("returned") is not None:
        rows.append(
            {
                "target": f"teardown returns >= {TARGET_RETURNED:.0%} of the held memory",
                "value": down["returned"],
                "met": down["returned"] >= TARGET_RETURNED,
            }
        )
    return rows


def summary(
    function: str,
    levels: list[int],
    modes: dict[str, dict],
    starts: dict | None,
    down: dict | None,
    loaded_starts: dict | None = None,
) -> dict:
    gains = p99_gains(modes)
    return {
        "function": function,
        "levels": levels,
        "modes": modes,
        "p99_isolate_vs_shared": gains,
        "isolate_start_ms": starts,
        "isolate_start_ms_loaded": loaded_starts,
        "teardown": down,
        "targets": targets(gains, starts, down),
    }
