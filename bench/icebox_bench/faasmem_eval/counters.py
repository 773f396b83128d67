"""What icebox moved: bytes offloaded and refaulted, per function and for the node.

Three sources, each reported for what it is:

* **events** (`offloaded`, detail like "runtime 12.3 MiB in 4 ms"; `refaulted`, detail holding
  a size): per instance, hence per function, and per step; summed inside the window;
* **instance counters** (`offload.offloaded_bytes`, `offload.refaulted_bytes` in the instance
  view): the largest value each instance showed, summed over the function's instances (an
  instance that lived between two samples is missed);
* **Prometheus** (`icebox_offloaded_bytes_total{step}`, `icebox_refaulted_bytes_total`): the
  node's totals, the increase between the first and last sample of the window.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ..promtext import metric_sum
from .local_memory import action_name, offload_of

_UNITS = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 1 << 10,
    "kb": 1 << 10,
    "mib": 1 << 20,
    "mb": 1 << 20,
    "gib": 1 << 30,
    "gb": 1 << 30,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(bytes|byte|b|kib|kb|mib|mb|gib|gb)\b", re.IGNORECASE)
_STEP = re.compile(r"^\s*([a-z_-]+)\b", re.IGNORECASE)
_TOOK = re.compile(r"\bin\s+(\d+(?:\.\d+)?)\s*ms\b")

OFFLOADED_TOTAL = "icebox_offloaded_bytes_total"
REFAULTED_TOTAL = "icebox_refaulted_bytes_total"


def parse_size(detail: str | None) -> int | None:
    """The first size in an event's detail ("runtime 12.3 MiB in 4 ms" -> 12897484)."""
    m = _SIZE.search(detail or "")
    return None if m is None else int(round(float(m.group(1)) * _UNITS[m.group(2).lower()]))


def parse_offloaded(detail: str | None) -> dict:
    """{step, bytes, ms} of an `offloaded` event's detail; missing parts are None."""
    step = _STEP.match(detail or "")
    took = _TOOK.search(detail or "")
    return {
        "step": step.group(1).lower() if step else None,
        "bytes": parse_size(detail),
        "ms": float(took.group(1)) if took else None,
    }


def event_totals(events: list[dict], start_ms: float, end_ms: float) -> dict[str, dict]:
    """Per function: offloaded bytes (and by step), refaulted bytes, event counts, offload ms."""
    out: dict[str, dict] = defaultdict(
        lambda: {
            "offloaded_bytes": 0,
            "refaulted_bytes": 0,
            "offloads": 0,
            "refaults": 0,
            "offload_ms": 0.0,
            "by_step": defaultdict(int),
            "unparsed": 0,
        }
    )
    for e in events:
        t = e.get("time_ms")
        kind = e.get("kind")
        if kind not in ("offloaded", "refaulted") or t is None or not start_ms <= t <= end_ms:
            continue
        entry = out[action_name(e.get("action"))]
        if kind == "offloaded":
            parsed = parse_offloaded(e.get("detail"))
            entry["offloads"] += 1
            if parsed["bytes"] is None:
                entry["unparsed"] += 1
                continue
            entry["offloaded_bytes"] += parsed["bytes"]
            entry["by_step"][parsed["step"] or "?"] += parsed["bytes"]
            entry["offload_ms"] += parsed["ms"] or 0.0
        else:
            size = parse_size(e.get("detail"))
            entry["refaults"] += 1
            if size is None:
                entry["unparsed"] += 1
            else:
                entry["refaulted_bytes"] += size
    return {f: {**v, "by_step": dict(v["by_step"]), "offload_ms": round(v["offload_ms"], 3)} for f, v in out.items()}


def instance_totals(samples: list[dict], start_ms: float, end_ms: float) -> dict[str, dict]:
    """Per function: the sum over its instances of the largest offloaded_bytes / refaulted_bytes
    each showed inside the window."""
    peaks: dict[tuple[str, str], dict] = {}
    for s in samples:
        t = s.get("t_ms")
        if t is None or not start_ms <= t <= end_ms:
            continue
        for row in s.get("instances") or []:
            off = offload_of(row)
            if not off:
                continue
            key = (action_name(row.get("action")), row.get("id") or "")
            peak = peaks.setdefault(key, {"offloaded_bytes": 0, "refaulted_bytes": 0})
            for field in peak:
                peak[field] = max(peak[field], int(off.get(field) or 0))
    out: dict[str, dict] = defaultdict(lambda: {"offloaded_bytes": 0, "refaulted_bytes": 0, "instances": 0})
    for (function, _), peak in peaks.items():
        entry = out[function]
        entry["instances"] += 1
        for field, value in peak.items():
            entry[field] += value
    return dict(out)


def bounds(samples: list[dict], start_ms: float, end_ms: float, key: str = "metrics") -> tuple[dict, dict] | None:
    """The samples (those holding `key`) a window's increases are taken between: the last one
    at or before its start (else the first one), and the last one at or before its end."""
    usable = [p for p in samples if p.get("t_ms") is not None and p.get(key) is not None and p["t_ms"] <= end_ms]
    if not usable:
        return None
    before = [p for p in usable if p["t_ms"] <= start_ms]
    return (before[-1] if before else usable[0]), usable[-1]


def counter_increase(
    prom_samples: list[dict], start_ms: float, end_ms: float, name: str, **labels: str
) -> float | None:
    """Increase of a counter (summed over matching label sets) over the window; None when the
    daemon never exported it."""
    pair = bounds(prom_samples, start_ms, end_ms)
    if pair is None or not any(n == name for n, _, _ in pair[1]["metrics"]):
        return None
    first, last = pair
    return max(0.0, metric_sum(last["metrics"], name, **labels) - metric_sum(first["metrics"], name, **labels))


def node_totals(prom_samples: list[dict], start_ms: float, end_ms: float) -> dict:
    """The node's offloaded bytes (total and per step) and refaulted bytes over the window."""
    pair = bounds(prom_samples, start_ms, end_ms)
    steps = sorted(
        {labels.get("step", "") for n, labels, _ in (pair[1]["metrics"] if pair else []) if n == OFFLOADED_TOTAL}
    )
    return {
        "offloaded_bytes": counter_increase(prom_samples, start_ms, end_ms, OFFLOADED_TOTAL),
        "offloaded_by_step": {
            s: counter_increase(prom_samples, start_ms, end_ms, OFFLOADED_TOTAL, step=s) for s in steps
        },
        "refaulted_bytes": counter_increase(prom_samples, start_ms, end_ms, REFAULTED_TOTAL),
    }
