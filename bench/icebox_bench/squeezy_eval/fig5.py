"""squeezy-fig5's analysis: Squeezy's Fig. 5 (reclaim latency per memory mode and partition
size) and Fig. 6's point (vanilla virtio-mem slows down as the VM fills up; Squeezy does not),
from the squeezy_reclaim example's lines.

A series is a memory mode with a guest zeroing setting: each mode's default (Fig. 5: squeezy
without guest zeroing, the baselines with the stock kernel's init_on_alloc), plus vanilla
virtio-mem without zeroing (Fig. 6's vanilla, which isolates the cost of page migrations).
Fullness is the share of the VM's partitions in use when the target instance's partition is
taken back (1.0: the paper's Fig. 5 setup, a VM full of memhog instances)."""

from __future__ import annotations

import math
import statistics

# (mode, guest zeroing: None = the mode's default) per series, in plotting order.
SERIES = {
    "squeezy": ("squeezy", None),
    "virtio-mem": ("virtio-mem", None),
    "virtio-mem-nozero": ("virtio-mem", False),
    "balloon": ("balloon", None),
}
BASELINES = ("virtio-mem", "balloon", "virtio-mem-nozero")
# Squeezy §6.1.1: 10.9x faster than the baselines on average; 2 GiB in 127 ms; vanilla
# virtio-mem 617 ms for 512 MiB and ~2.5 s for 2 GiB; zeroing 24% of vanilla's unplug time.
PAPER = {
    "speedup_average": 10.9,
    "squeezy_2048_ms": 127.0,
    "virtio_mem_512_ms": 617.0,
    "virtio_mem_2048_ms": 2500.0,
    "zeroing_share": 0.24,
}
# The bar: at least 5x faster than each baseline, and no page migrated.
TARGET_SPEEDUP = 5.0


def series_of(sample: dict) -> str:
    """The series a line belongs to: its `series` tag (the runner's), else its mode and zeroing."""
    if sample.get("series"):
        return str(sample["series"])
    mode = str(sample.get("mode"))
    if mode == "virtio-mem" and sample.get("guest_zeroing") is False:
        return "virtio-mem-nozero"
    return mode


def fullness_key(value: float) -> str:
    return f"{float(value):.3g}"


def _median(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def geomean(values) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def cell(samples: list[dict]) -> dict:
    """Medians of one series x size x fullness; reclaims that did not release are counted apart
    (a timed-out unplug's time is the timeout, not a latency)."""
    reports = [s["report"] for s in samples]
    released = [r for r in reports if r.get("outcome") == "released"]
    return {
        "unplug_ms": _median(r.get("unplug_ms") for r in released),
        "drain_ms": _median(r.get("drain_ms") for r in released),
        "stop_ms": _median(r.get("stop_ms") for r in released),
        "destroy_ms": _median(
            s.get("destroy_ms") for s, r in zip(samples, reports, strict=True) if r.get("outcome") == "released"
        ),
        "pages_migrated": _median(r.get("pages_migrated") for r in released),
        "fill_s": _median(s.get("fill_s") for s in samples),
        "n": len(released),
        "not_released": {
            o: sum(1 for r in reports if r.get("outcome") == o)
            for o in sorted({r.get("outcome") for r in reports} - {"released"})
        },
    }


def cells(samples: list[dict]) -> dict[str, dict[int, dict[str, dict]]]:
    """series -> size (MiB) -> fullness -> cell."""
    out: dict[str, dict[int, dict[str, dict]]] = {}
    for s in samples:
        if "report" not in s:
            continue
        out.setdefault(series_of(s), {}).setdefault(int(s["size_mib"]), {}).setdefault(
            fullness_key(s["fullness"]), []
        ).append(s)
    return {
        series: {size: {f: cell(group[f]) for f in sorted(group, key=float)} for size, group in sorted(by_size.items())}
        for series, by_size in out.items()
    }


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or den is None or den <= 0 else num / den


def ratios(table: dict, size: int) -> dict[str, dict]:
    """Per baseline: its unplug time over squeezy's at each fullness, their mean, and at the
    fullest level both measured (the paper's Fig. 5 point)."""
    squeezy = table.get("squeezy", {}).get(size, {})
    out = {}
    for base in BASELINES:
        other = table.get(base, {}).get(size, {})
        by_fullness = {
            f: _ratio(other[f]["unplug_ms"], squeezy[f]["unplug_ms"])
            for f in sorted(set(squeezy) & set(other), key=float)
        }
        known = {f: r for f, r in by_fullness.items() if r is not None}
        full = max(known, key=float) if known else None
        out[base] = {
            "by_fullness": by_fullness,
            "mean": statistics.mean(known.values()) if known else None,
            "at_full": known[full] if full else None,
            "full": full,
        }
    return out


def zeroing_share(table: dict, size: int) -> float | None:
    """Share of vanilla virtio-mem's unplug time that guest zeroing costs, at full VM."""
    zero, nozero = table.get("virtio-mem", {}).get(size, {}), table.get("virtio-mem-nozero", {}).get(size, {})
    common = sorted(set(zero) & set(nozero), key=float)
    if not common:
        return None
    a, b = zero[common[-1]]["unplug_ms"], nozero[common[-1]]["unplug_ms"]
    return None if a is None or b is None or a <= 0 else (a - b) / a


def targets(overall: dict, squeezy_migrated: int | None, series: list[str] | None = None) -> list[dict]:
    """The issue's targets; a baseline left out of the run has none."""
    out = []
    for base in ("virtio-mem", "balloon"):
        if series is not None and base not in series:
            continue
        paper = PAPER["speedup_average"]
        value = overall.get(base, {}).get("at_full")
        out.append(
            {
                "target": f"squeezy >= {TARGET_SPEEDUP:g}x faster than {base} (geomean over sizes, full VM)",
                "value": value,
                "paper": paper,
                "met": value is not None and value >= TARGET_SPEEDUP,
            }
        )
    out.append(
        {"target": "squeezy migrates no page", "value": squeezy_migrated, "paper": 0, "met": squeezy_migrated == 0}
    )
    return out


def note_for(accel: str | None) -> str | None:
    if accel and accel.lower() == "tcg":
        return (
            "VMs ran under QEMU TCG (no usable KVM here): the guest's zeroing and migration run "
            "emulated, several times slower than on KVM, and exits cost more; compare the ratios "
            "between modes with the paper's, not the absolute times."
        )
    return None


def summary(
    samples: list[dict],
    *,
    sizes: list[int],
    series: list[str],
    partitions: int,
    fill: float,
    accel: str | None,
    failed: dict | None = None,
) -> dict:
    measured = [s for s in samples if "report" in s]
    table = cells(measured)
    per_size = {size: {"ratios": ratios(table, size), "zeroing_share": zeroing_share(table, size)} for size in sizes}
    overall = {
        base: {
            "mean": geomean(per_size[s]["ratios"][base]["mean"] for s in sizes),
            "at_full": geomean(per_size[s]["ratios"][base]["at_full"] for s in sizes),
        }
        for base in BASELINES
    }
    squeezy = [s["report"] for s in measured if series_of(s) == "squeezy"]
    migrated = sum(int(r.get("pages_migrated") or 0) for r in squeezy) if squeezy else None
    errors = {f"{series_of(s)} {s.get('size_mib')} MiB": s["error"] for s in samples if "error" in s}
    accel_seen = next((str(s["accel"]).lower() for s in measured if s.get("accel")), None)
    accel = accel_seen or accel
    return {
        "accel": accel,
        "sizes": sizes,
        "series": series,
        "partitions": partitions,
        "fill": fill,
        "cells": {k: {str(size): v for size, v in by_size.items()} for k, by_size in table.items()},
        "per_size": {str(k): v for k, v in per_size.items()},
        "overall": overall,
        "squeezy_pages_migrated": migrated,
        "squeezy_migrate_failures": sum(int(r.get("migrate_failures") or 0) for r in squeezy) if squeezy else None,
        "paper": PAPER,
        "targets": targets(overall, migrated, series),
        "failed": {**(failed or {}), **errors},
        "note": note_for(accel),
        "samples": samples,
    }
