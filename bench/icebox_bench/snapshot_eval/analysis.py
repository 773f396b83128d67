"""snapshot-restore's summary, from the samples (run.py) alone: pure functions.

summary.json:

    {"config": {...the recipe's settings...},
     "functions": {F: {
         "snapshots": {M: {"files", "disk_bytes", "memory_bytes", "took_ms", "loading_set"}},
         "cells": {M: {V: cell}, "start": {"-": cell}},
         "faasnap_speedup_over_lazy": {"cold": x, "cached": x},   # lazy p50 / faasnap p50
         "faasnap_vs_cached": {"faasnap": x, "lazy": x},           # faasnap cold p50 / (M cached) p50
         "start_over_restore": {M: x},                               # normal start p50 / M cold p50
         "uss_vs_start": {M: {V: x}}}},                              # restored USS p50 / normal USS p50
     "targets": [{"function", "target", "value", "met"}],
     "failed": {F: reason}}

cell: {"n", "latency_ms": {"p50", "min", "max"} (client), "restore_ms" (initTime p50),
"duration_ms", "wait_ms" (p50), "uss_mib", "pss_mib", "rss_mib" (p50), "resident" (p50 share of
the snapshot's pages in the page cache before the invocation), "criu_ms" and "pager"
({faults, fault_pages, zero_pages, loader_pages, bytes_read, loader_ms, pending_pages} p50;
null for eager and lazy, which icebox's pager does not serve)}. M: a restore mode, V: cold or
cached; medians over the repetitions.
"""

from __future__ import annotations

import statistics

from ..units import MIB

TARGET_FAASNAP_OVER_LAZY = 2.0
PAGER_KEYS = ("faults", "fault_pages", "zero_pages", "loader_pages", "bytes_read", "loader_ms", "pending_pages")


def median(values) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return round(statistics.median(xs), 3) if xs else None


def _pager(samples: list[dict]) -> dict | None:
    pagers = [((s.get("restore_stats") or {}).get("pager")) for s in samples]
    pagers = [p for p in pagers if isinstance(p, dict)]
    if not pagers:
        return None
    return {k: median(p.get(k) for p in pagers) for k in PAGER_KEYS}


def cell(samples: list[dict]) -> dict:
    """Medians of one (function, mode, variant)'s samples."""
    lat = [float(s["latency_ms"]) for s in samples]
    resident = [s["resident_pages"] / s["snapshot_pages"] for s in samples if s.get("snapshot_pages")]
    return {
        "n": len(samples),
        "latency_ms": {
            "p50": median(lat),
            "min": round(min(lat), 3) if lat else None,
            "max": round(max(lat), 3) if lat else None,
        },
        "restore_ms": median(s.get("init_ms") for s in samples),
        "duration_ms": median(s.get("duration_ms") for s in samples),
        "wait_ms": median(s.get("wait_ms") for s in samples),
        "uss_mib": _mib(median(s.get("uss") for s in samples)),
        "pss_mib": _mib(median(s.get("pss") for s in samples)),
        "rss_mib": _mib(median(s.get("rss") for s in samples)),
        "resident": round(statistics.median(resident), 4) if resident else None,
        "criu_ms": median((s.get("restore_stats") or {}).get("criu_ms") for s in samples),
        "pager": _pager(samples),
    }


def _mib(value: float | None) -> float | None:
    return None if value is None else round(value / MIB, 3)


def cells(samples: list[dict]) -> dict[str, dict[str, dict]]:
    """{mode: {variant: cell}} of one function's samples."""
    grouped: dict[str, dict[str, list[dict]]] = {}
    for s in samples:
        grouped.setdefault(s["mode"], {}).setdefault(s["variant"], []).append(s)
    return {m: {v: cell(ss) for v, ss in by_v.items()} for m, by_v in grouped.items()}


def _p50(cs: dict, mode: str, variant: str) -> float | None:
    return (((cs.get(mode) or {}).get(variant) or {}).get("latency_ms") or {}).get("p50")


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def function_summary(samples: list[dict], snapshots: dict | None = None) -> dict:
    cs = cells(samples)
    start = _p50(cs, "start", "-")
    start_uss = ((cs.get("start") or {}).get("-") or {}).get("uss_mib")
    restored = [m for m in cs if m != "start"]
    return {
        "snapshots": snapshots or {},
        "cells": cs,
        "faasnap_speedup_over_lazy": {
            v: _ratio(_p50(cs, "lazy", v), _p50(cs, "faasnap", v)) for v in ("cold", "cached")
        },
        "faasnap_vs_cached": {
            m: _ratio(_p50(cs, "faasnap", "cold"), _p50(cs, m, "cached")) for m in ("faasnap", "lazy")
        },
        "start_over_restore": {m: _ratio(start, _p50(cs, m, "cold")) for m in restored},
        "uss_vs_start": {m: {v: _ratio(c.get("uss_mib"), start_uss) for v, c in cs[m].items()} for m in restored},
    }


def targets(functions: dict[str, dict]) -> list[dict]:
    """Issue 11: from a page-cache-cold snapshot, a FaaSnap restore ≥ 2× faster than a plain lazy
    one (client time of restore + the invocation), judged per function."""
    rows = []
    for name, f in functions.items():
        value = f["faasnap_speedup_over_lazy"].get("cold")
        if value is not None:
            rows.append(
                {
                    "function": name,
                    "target": f"faasnap >= {TARGET_FAASNAP_OVER_LAZY:g}x faster than lazy, page-cache-cold",
                    "value": value,
                    "met": value >= TARGET_FAASNAP_OVER_LAZY,
                }
            )
    return rows


def summary(
    config: dict,
    samples: dict[str, list[dict]],
    snapshots: dict[str, dict] | None = None,
    failed: dict[str, str] | None = None,
) -> dict:
    """`samples` and `snapshots` per function (run.measure_function's results)."""
    functions = {name: function_summary(ss, (snapshots or {}).get(name)) for name, ss in samples.items() if ss}
    return {"config": config, "functions": functions, "targets": targets(functions), "failed": failed or {}}
