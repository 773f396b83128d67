"""FaaSMem's overheads (§8.5, Fig. 15) and what the kernel swapped on its own.

* barrier time: `icebox_offload_barrier_seconds{barrier}` (histogram), per barrier;
* step time (offload, probe, rollback...): `icebox_offload_step_seconds{step}` (histogram);
  both as count, mean and estimated p50 / p95 / p99 (Prometheus' histogram_quantile: linear
  inside the bucket) of the observations made inside the window;
* refault cost per request: refaulted bytes / requests;
* daemon CPU: utime + stime of the iceboxd process over the window (cpu.jsonl's `daemon_s`);
* the kernel's swap, apart from icebox's counters: /proc/swaps `Used` (peak and at the end) and
  /proc/vmstat pswpout / pswpin over the window. This machine's DAMON pages out memory cold
  for >= 60 s whenever swap exists, so the kernel's totals may exceed what icebox moved.
"""

from __future__ import annotations

import math
from collections import defaultdict

from ..desiccant_eval.cpu import window_cpu
from .counters import bounds

BARRIER_HISTOGRAM = "icebox_offload_barrier_seconds"
STEP_HISTOGRAM = "icebox_offload_step_seconds"
PAGE_SIZE = 4096


def _buckets(metrics, name: str, label: str) -> dict[str, dict]:
    """{label value: {"buckets": {le: cumulative count}, "sum": s, "count": n}}."""
    out: dict[str, dict] = defaultdict(lambda: {"buckets": {}, "sum": 0.0, "count": 0.0})
    for n, labels, value in metrics:
        key = labels.get(label, "")
        if n == f"{name}_bucket":
            le = labels.get("le", "+Inf")
            out[key]["buckets"][math.inf if le in ("+Inf", "Inf") else float(le)] = value
        elif n == f"{name}_sum":
            out[key]["sum"] = value
        elif n == f"{name}_count":
            out[key]["count"] = value
    return dict(out)


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' estimate from cumulative bucket counts {upper bound: count}; None if empty.
    In the +Inf bucket it answers the highest finite bound."""
    bounds_ = sorted(buckets)
    if not bounds_ or buckets[bounds_[-1]] <= 0:
        return None
    total = buckets[bounds_[-1]]
    rank = q * total
    lower, below = 0.0, 0.0
    for upper in bounds_:
        count = buckets[upper]
        if count >= rank:
            if math.isinf(upper):
                finite = [b for b in bounds_ if not math.isinf(b)]
                return finite[-1] if finite else None
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return None


def histogram_window(
    prom_samples: list[dict], start_ms: float, end_ms: float, name: str, label: str
) -> dict[str, dict] | None:
    """Per label value, the observations inside the window: count, mean and p50/p95/p99 in ms.
    None when the daemon never exported the histogram."""
    pair = bounds(prom_samples, start_ms, end_ms)
    if pair is None:
        return None
    first, last = (_buckets(p["metrics"], name, label) for p in pair)
    if not last:
        return None
    out = {}
    for key, end in sorted(last.items()):
        begin = first.get(key, {"buckets": {}, "sum": 0.0, "count": 0.0})
        count = end["count"] - begin["count"]
        delta = {b: c - begin["buckets"].get(b, 0.0) for b, c in end["buckets"].items()}
        out[key] = {
            "count": int(count),
            "mean_ms": round(1000.0 * (end["sum"] - begin["sum"]) / count, 3) if count > 0 else None,
            **{f"p{q}_ms": _ms(histogram_quantile(q / 100.0, delta)) for q in (50, 95, 99)},
        }
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000.0 * seconds, 3)


# ---- the kernel's own swap ------------------------------------------------------------------


def parse_proc_swaps(text: str) -> list[dict]:
    """/proc/swaps: [{device, type, size_bytes, used_bytes, priority}]."""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 5:
            out.append(
                {
                    "device": fields[0],
                    "type": fields[1],
                    "size_bytes": int(fields[2]) * 1024,
                    "used_bytes": int(fields[3]) * 1024,
                    "priority": int(fields[4]),
                }
            )
    return out


def parse_vmstat(text: str, keys=("pswpin", "pswpout")) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in keys:
            out[name] = int(value)
    return out


def kernel_swap(system_samples: list[dict], start_ms: float, end_ms: float) -> dict | None:
    """Swap use and swap traffic over the window (from the last sample at or before its start),
    every swap device together (icebox's zram device included: the kernel does not say who put
    a page there)."""
    pair = bounds(system_samples, start_ms, end_ms, key="vmstat")
    if pair is None:
        return None
    first, last = pair
    inside = [s for s in system_samples if first["t_ms"] <= s.get("t_ms", -1) <= last["t_ms"]]

    def used(sample):
        return sum(d["used_bytes"] for d in sample.get("swaps") or [])

    out = {
        "devices": sorted({d["device"] for s in inside for d in s.get("swaps") or []}),
        "used_peak_bytes": max(used(s) for s in inside),
        "used_end_bytes": used(last),
    }
    for key in ("pswpout", "pswpin"):
        a, b = first["vmstat"].get(key), last["vmstat"].get(key)
        out[f"{key}_bytes"] = None if a is None or b is None else (b - a) * PAGE_SIZE
    return out


# ---- all of it for one run ------------------------------------------------------------------


def run_overheads(
    offload_samples: list[dict],
    cpu_samples: list[dict],
    start_ms: float,
    end_ms: float,
    *,
    requests: int,
    refaulted_bytes: float | None,
) -> dict:
    """offload_samples: offload.jsonl (probes.py: /metrics and the kernel's swap); cpu_samples:
    cpu.jsonl."""
    cpu = window_cpu(cpu_samples, start_ms, end_ms)
    return {
        "barriers": histogram_window(offload_samples, start_ms, end_ms, BARRIER_HISTOGRAM, "barrier"),
        "steps": histogram_window(offload_samples, start_ms, end_ms, STEP_HISTOGRAM, "step"),
        "refaulted_bytes_per_request": (
            round(refaulted_bytes / requests, 1) if refaulted_bytes is not None and requests else None
        ),
        "daemon_cpu_s": None if cpu is None else cpu["daemon_s"],
        "cpu": cpu,
        "kernel_swap": kernel_swap(offload_samples, start_ms, end_ms),
    }
