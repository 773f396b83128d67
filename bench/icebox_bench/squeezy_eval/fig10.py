"""squeezy-fig10's analysis: Squeezy's Fig. 10 — per function, the p99 latency of a trace
replayed through N:1 VMs when host memory for partitions is abundant and when it is limited
(a start must wait for idle instances' partitions to be unplugged), per memory mode; and the
memory the partitions held over the run (GiB-s).

A run is one (mode, scenario) replay, given as a dict: mode, scenario, vm_memory_bytes,
start_ms/end_ms (the replay's window), invocations (invocations.jsonl lines), events (the
daemon's lifecycle events), plugged ((t_ms, bytes) samples of the daemon's plugged-memory
gauge), memory (memory.jsonl samples), partition_bytes, error."""

from __future__ import annotations

import json
import re
import statistics

from ..stats import percentile, step_integral

MODES = ("squeezy", "virtio-mem", "balloon")
SCENARIOS = ("abundant", "pressure")
# Squeezy §6.2.2: p99 under limited memory over abundant, on average over functions; Squeezy
# accounts 42.5% less memory (GiB-s) than vanilla virtio-mem.
PAPER = {"p99_ratio": {"squeezy": 1.1, "virtio-mem": 3.15}, "gib_s_saving_vs_virtio_mem": 0.425}
# Squeezy keeps its tail within 25% of the abundant run's, and below vanilla virtio-mem's.
TARGET_SQUEEZY_RATIO = 1.25
GIB = float(1 << 30)
RELEASED = ("released", "vm_gone")


def run_key(mode: str, scenario: str) -> str:
    return f"{mode}/{scenario}"


def _detail(event: dict) -> dict:
    try:
        detail = json.loads(event.get("detail") or "{}")
    except (TypeError, ValueError):
        return {}
    return detail if isinstance(detail, dict) else {}


def error_key(invocation: dict) -> str:
    """One key per cause: the daemon's `icebox.error` kind when the record has one, else (no
    record: the client gave up, or an older daemon) the message with its numbers masked, so
    VMs, sizes and waits do not split one cause."""
    if invocation.get("error_kind"):
        return str(invocation["error_kind"])
    return re.sub(r"\d+(\.\d+)?", "N", str(invocation["error"]))[:240]


def latency_entry(invocations: list[dict]) -> dict:
    """p50/p99 of the answered invocations (successes and function errors: both were served);
    the others are counted by status."""
    measured = [i for i in invocations if not i.get("warmup")]
    served = [
        i for i in measured if i.get("status") in ("success", "application_error") and i.get("latency_ms") is not None
    ]
    latencies = [i["latency_ms"] for i in served]
    statuses: dict[str, int] = {}
    errors: dict[str, int] = {}
    for i in measured:
        statuses[i.get("status", "?")] = statuses.get(i.get("status", "?"), 0) + 1
        if i.get("error") and i not in served:
            key = error_key(i)
            errors[key] = errors.get(key, 0) + 1
    return {
        "n": len(served),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": max(latencies) if latencies else None,
        "cold": sum(1 for i in served if i.get("start_kind") == "cold"),
        "warm": sum(1 for i in served if i.get("start_kind") == "warm"),
        "statuses": statuses,
        "timeouts": statuses.get("timeout", 0) + statuses.get("abandoned", 0),
        "unserved": len(measured) - len(served),
        "errors": errors,
    }


def partition_events(events: list[dict]) -> list[dict]:
    return [e for e in events if str(e.get("kind", "")).startswith("partition_")]


def plugged_from_events(events: list[dict]) -> list[tuple[float, float]]:
    """The plugged-memory step function the partition events imply: (t_ms, bytes) after each."""
    level = 0.0
    held: dict[str, float] = {}  # instance -> bytes still plugged (a stuck unplug keeps them)
    out = []
    for e in sorted(partition_events(events), key=lambda e: (e.get("time_ms", 0), e.get("seq", 0))):
        kind, d, inst = e["kind"], _detail(e), e.get("instance", "")
        if kind == "partition_plugged":
            held[inst] = float(d.get("bytes") or 0)
            level += held[inst]
        elif (
            kind == "partition_reclaimed" and d.get("outcome", "released") in RELEASED
        ) or kind == "partition_recovered":
            level -= held.pop(inst, float(d.get("bytes") or 0))
        else:
            continue
        out.append((float(e["time_ms"]), max(level, 0.0)))
    return out


def plugged_from_memory(memory: list[dict], partition_bytes: int) -> list[tuple[float, float]]:
    """Fallback when neither events nor the gauge are there: every listed instance holds one
    partition (an over-estimate while a partition is being unplugged after its instance left)."""
    return [(float(m["t_ms"]), float(len(m.get("instances") or []) * partition_bytes)) for m in memory]


def memory_entry(run: dict) -> dict:
    """GiB-s and peak of plugged memory over the replay, from the best source present."""
    events = partition_events(run.get("events") or [])
    sources = [
        ("events", plugged_from_events(events)),
        ("metrics", list(run.get("plugged") or [])),
        ("instances", plugged_from_memory(run.get("memory") or [], int(run.get("partition_bytes") or 0))),
    ]
    source, series = next(((name, s) for name, s in sources if s), ("none", []))
    start, end = run.get("start_ms"), run.get("end_ms")
    gib_s = peak = None
    if series and start is not None and end is not None and end > start:
        before = [v for t, v in series if t <= start]
        times = [start / 1000.0] + [t / 1000.0 for t, _ in series if t > start]
        values = [before[-1] if before else 0.0] + [v for t, v in series if t > start]
        gib_s = step_integral(times, values, start / 1000.0, end / 1000.0) / GIB
        peak = max(v for t, v in zip(times, values, strict=True) if t <= end / 1000.0) / GIB
    plugs = [_detail(e) for e in events if e["kind"] == "partition_plugged"]
    reclaims = [_detail(e) for e in events if e["kind"] == "partition_reclaimed"]
    released = [d for d in reclaims if d.get("outcome", "released") == "released"]
    return {
        "source": source,
        "gib_s": gib_s,
        "peak_gib": peak,
        # Over the whole run (warm-up included): the budget of a pressure run derives from it.
        "peak_bytes_run": max((v for _, v in series), default=None),
        "plugs": len(plugs),
        "plugs_waited": sum(1 for d in plugs if (d.get("waited_ms") or 0) > 1.0),
        "plug_wait_ms_p99": percentile([d.get("waited_ms") or 0.0 for d in plugs], 99),
        "vm_boots": sum(1 for d in plugs if d.get("booted_vm")),
        "reclaims": len(reclaims),
        "reclaims_stuck": sum(1 for e in events if e["kind"] == "partition_stuck"),
        "reclaims_recovered": sum(1 for e in events if e["kind"] == "partition_recovered"),
        "unplug_ms_median": statistics.median([d["unplug_ms"] for d in released if d.get("unplug_ms") is not None])
        if any(d.get("unplug_ms") is not None for d in released)
        else None,
        "pages_migrated": sum(int(d.get("pages_migrated") or 0) for d in reclaims),
    }


def run_entry(run: dict, functions: list[str]) -> dict:
    invs = run.get("invocations") or []
    by_fn = {fn: latency_entry([i for i in invs if i.get("function") == fn]) for fn in functions}
    return {
        "mode": run["mode"],
        "scenario": run["scenario"],
        "vm_memory_bytes": run.get("vm_memory_bytes"),
        "duration_s": None
        if run.get("start_ms") is None or run.get("end_ms") is None
        else (run["end_ms"] - run["start_ms"]) / 1000.0,
        "functions": by_fn,
        "all": latency_entry(invs),
        "memory": memory_entry(run),
        "error": run.get("error"),
    }


def _ratio(num, den):
    return None if num is None or den is None or den <= 0 else num / den


def mode_ratios(runs: dict[str, dict], mode: str, functions: list[str]) -> dict:
    """p99 and GiB-s under pressure over abundant, per function and on average (the paper's
    'on average': the arithmetic mean of the functions' ratios)."""
    a, p = runs.get(run_key(mode, "abundant")), runs.get(run_key(mode, "pressure"))
    if not a or not p:
        return {"by_function": {}, "p99_ratio_mean": None, "gib_s_ratio": None}
    by_fn = {fn: _ratio(p["functions"][fn]["p99_ms"], a["functions"][fn]["p99_ms"]) for fn in functions}
    known = [r for r in by_fn.values() if r is not None]
    return {
        "by_function": by_fn,
        "p99_ratio_mean": statistics.mean(known) if known else None,
        "gib_s_ratio": _ratio(p["memory"]["gib_s"], a["memory"]["gib_s"]),
    }


def targets(ratios: dict, runs: dict) -> list[dict]:
    sq = (ratios.get("squeezy") or {}).get("p99_ratio_mean")
    vm = (ratios.get("virtio-mem") or {}).get("p99_ratio_mean")
    pressured = [r for k, r in runs.items() if k.endswith("/pressure")]
    return [
        {
            "target": f"squeezy's p99 under pressure <= {TARGET_SQUEEZY_RATIO:g}x its abundant p99"
            " (mean over functions)",
            "value": sq,
            "paper": PAPER["p99_ratio"]["squeezy"],
            "met": sq is not None and sq <= TARGET_SQUEEZY_RATIO,
        },
        {
            "target": "squeezy's p99 ratio below vanilla virtio-mem's",
            "value": None if sq is None or vm is None else vm / sq,
            "paper": PAPER["p99_ratio"]["virtio-mem"] / PAPER["p99_ratio"]["squeezy"],
            "met": sq is not None and vm is not None and sq < vm,
        },
        # Without waits for memory the pressure runs measured nothing the paper's did.
        {
            "target": "the budget made starts wait for reclaimed memory in every pressure run",
            "value": min((r["memory"]["plugs_waited"] for r in pressured), default=None),
            "paper": None,
            "met": bool(pressured) and all(r["memory"]["plugs_waited"] > 0 for r in pressured),
        },
    ]


def summary(
    runs: list[dict],
    *,
    functions: list[str],
    modes: list[str],
    accel: str | None,
    failed: dict | None = None,
    config: dict | None = None,
) -> dict:
    entries = {run_key(r["mode"], r["scenario"]): run_entry(r, functions) for r in runs}
    ratios = {mode: mode_ratios(entries, mode, functions) for mode in modes}
    sq_p = entries.get(run_key("squeezy", "pressure"), {}).get("memory", {}).get("gib_s")
    vm_p = entries.get(run_key("virtio-mem", "pressure"), {}).get("memory", {}).get("gib_s")
    note = None
    if accel == "tcg":
        note = (
            "VMs ran under QEMU TCG (no usable KVM here): instance starts take seconds and unplugs "
            "run emulated, so latencies are inflated throughout; compare each mode's pressure / "
            "abundant ratios with the paper's, not the absolute times."
        )
    return {
        "accel": accel,
        "functions": functions,
        "modes": modes,
        "runs": entries,
        "ratios": ratios,
        "gib_s_saving_vs_virtio_mem": None if sq_p is None or not vm_p else 1.0 - sq_p / vm_p,
        "paper": PAPER,
        "targets": targets(ratios, entries),
        "failed": failed or {},
        "config": config or {},
        "note": note,
    }
