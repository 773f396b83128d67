"""The semi-warm period (FaaSMem §6, the timeline of Fig. 13): one function invoked in bursts
separated by long idle times, with `--semiwarm` on and off (both in faasmem mode).

The pattern (`pattern`): `burst` requests `gap_s` apart, `idle_s` of nothing, repeated `cycles`
times, then one last request. The first request after an idle time is a *wake* request: the
one that ends the semi-warm period (if it began). Every record's `trace_function` holds its
role (`burst` or `wake`).

Per idle period: the function's local memory (local_memory.LocalSeries) just after the burst,
its time average, minimum and value just before the wake request; when the instance turned
semi-warm (`offload.semiwarm`, seconds after the burst's last answer); what icebox offloaded
meanwhile (events); the wake request's latency and start kind (it must be warm: a cold one
means the keep-alive ran out) and what it refaulted (events up to 5 s after its answer).
"""

from __future__ import annotations

from pathlib import Path

from .. import schedule as schedule_mod
from ..recorder import read_jsonl
from ..report.load import load_run
from ..stats import percentile
from ..units import MIB
from .counters import event_totals
from .fig12 import run_window
from .local_memory import LocalSeries, action_name, offload_of
from .overheads import run_overheads

BURST, WAKE = "burst", "wake"
REFAULT_AFTER_WAKE_MS = 5000.0


def pattern(function: str, burst: int, gap_s: float, idle_s: float, cycles: int) -> schedule_mod.Schedule:
    if burst < 1 or cycles < 1 or gap_s < 0 or idle_s <= 0:
        raise ValueError("the pattern needs burst >= 1, cycles >= 1, gap >= 0 and idle > 0")
    times: list[tuple[float, str]] = []
    t = 0.0
    for cycle in range(cycles):
        for k in range(burst):
            times.append((t, WAKE if cycle > 0 and k == 0 else BURST))
            if k < burst - 1:
                t += gap_s
        t += idle_s
    times.append((t, WAKE))
    items = [schedule_mod.Scheduled(i, offset, function, role, offset, False) for i, (offset, role) in enumerate(times)]
    return schedule_mod.Schedule(items, schedule_mod.Timeline(origin_s=0.0))


def variant_label(semiwarm: str) -> str:
    """A directory name for a --semiwarm value: 1%/s -> 1pct-per-s."""
    return semiwarm.replace("%", "pct").replace("/", "-per-")


def semiwarm_flags(samples: list[dict], function: str) -> list[tuple[float, bool]]:
    """(t s, any instance of the function semi-warm) per memory sample."""
    out = []
    for s in samples:
        if s.get("t_ms") is None:
            continue
        rows = [r for r in s.get("instances") or [] if action_name(r.get("action")) == function]
        out.append((s["t_ms"] / 1000.0, any(bool(offload_of(r).get("semiwarm")) for r in rows)))
    return out


def _mib(value) -> float | None:
    return None if value is None else round(value / MIB, 3)


def idle_periods(invocations: list[dict]) -> list[tuple[dict, dict]]:
    """(last request before the idle time, the wake request) pairs, in order."""
    ordered = sorted(invocations, key=lambda r: r.get("seq", 0))
    return [(ordered[i - 1], r) for i, r in enumerate(ordered) if r.get("trace_function") == WAKE and i > 0]


def analyse_period(
    series: LocalSeries, flags: list[tuple[float, bool]], events: list[dict], function: str, last: dict, wake: dict
) -> dict:
    start_s = (last.get("end_ms") or last.get("scheduled_ms")) / 1000.0
    wake_s = wake["scheduled_ms"] / 1000.0
    points = [(t, b) for t, b in zip(series.times, series.bytes[function], strict=True) if start_s <= t <= wake_s]
    began = next((t for t, on in flags if start_s <= t <= wake_s and on), None)
    offloaded = event_totals(events, start_s * 1000.0, wake_s * 1000.0).get(function, {})
    wake_end = wake.get("end_ms") or wake["scheduled_ms"]
    refaulted = event_totals(events, wake["scheduled_ms"], wake_end + REFAULT_AFTER_WAKE_MS).get(function, {})
    return {
        "idle_s": round(wake_s - start_s, 3),
        "local_after_burst_mib": _mib(points[0][1]) if points else None,
        "local_before_wake_mib": _mib(points[-1][1]) if points else None,
        "local_min_mib": _mib(min(b for _, b in points)) if points else None,
        "local_mean_mib": _mib(series.mean(function, start_s, wake_s)),
        "semiwarm_after_s": None if began is None else round(began - start_s, 3),
        "offloaded_idle_mib": _mib(offloaded.get("offloaded_bytes", 0)),
        "wake": {
            "latency_ms": wake.get("latency_ms"),
            "start_kind": wake.get("start_kind"),
            "status": wake.get("status"),
            "refaulted_mib": _mib(refaulted.get("refaulted_bytes", 0)),
        },
    }


def analyse_run(path: Path, function: str) -> dict:
    run = load_run(path)
    start, end = run_window(run)
    series = LocalSeries(run.memory, [function])
    series.check()
    flags = semiwarm_flags(run.memory, function)
    records = [r for r in run.invocations if r.get("function") == function]
    burst_ok = [
        r["latency_ms"]
        for r in records
        if r.get("trace_function") == BURST and r.get("status") == "success" and r.get("start_kind") == "warm"
    ]
    periods = [analyse_period(series, flags, run.events, function, last, wake) for last, wake in idle_periods(records)]
    totals = event_totals(run.events, start, end).get(function, {})
    ok = sum(1 for r in records if r.get("status") == "success")
    origin = start / 1000.0
    return {
        "periods": periods,
        "burst_warm_latency_ms": {"p50": _round(percentile(burst_ok, 50)), "max": _round(max(burst_ok, default=None))},
        "local_mean_mib": _mib(series.mean(function, origin, end / 1000.0)),
        "offloaded_mib": _mib(totals.get("offloaded_bytes", 0)),
        "refaulted_mib": _mib(totals.get("refaulted_bytes", 0)),
        "overheads": run_overheads(
            read_jsonl(path / "offload.jsonl"),
            read_jsonl(path / "cpu.jsonl"),
            start,
            end,
            requests=ok,
            refaulted_bytes=totals.get("refaulted_bytes"),
        ),
        "timeline": [
            [round(t - origin, 3), _mib(b), on]
            for (t, b), (_, on) in zip(zip(series.times, series.bytes[function], strict=True), flags, strict=True)
        ],
        "wakes": [
            {"offset_s": round(r["scheduled_ms"] / 1000.0 - origin, 3), "latency_ms": r.get("latency_ms")}
            for _, r in idle_periods(records)
        ],
    }


def _round(value):
    return None if value is None else round(value, 1)


def compare(variants: dict[str, dict]) -> dict:
    """Semi-warm on (any variant but `off`) against `off`: idle local memory and wake latency."""
    off = variants.get("off")
    out = {}
    for name, v in variants.items():
        if name == "off" or off is None:
            continue
        pairs = list(zip(v["periods"], off["periods"], strict=False))
        out[name] = {
            "idle_local_mean_ratio": [_ratio(a["local_mean_mib"], b["local_mean_mib"]) for a, b in pairs],
            "wake_latency_ratio": [_ratio(a["wake"]["latency_ms"], b["wake"]["latency_ms"]) for a, b in pairs],
        }
    return out


def _ratio(a, b):
    return round(a / b, 4) if a is not None and b else None


def summary(config: dict, variants: dict[str, dict]) -> dict:
    return {"config": config, "variants": variants, "comparison": compare(variants)}
