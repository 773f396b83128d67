"""The numbers a report compares, computed from one run directory.

Only the measured part counts: invocations flagged `warmup` are left out, and memory is taken
over the measured window, from the first measured invocation's scheduled time (or its start,
for a loop run) to the last measured invocation's end.

* latency: client-side latency of successful invocations, ms;
* cold-start rate: cold / (cold + warm) over invocations that reached an instance;
* throughput: successful invocations per second of the measured window;
* memory: the node's total USS (sum over live instances) per memory sample, mean and peak;
* idle memory: ∫ USS of idle, frozen and prewarmed instances dt over the window, GiB·s: what
  keeping instances warm costs, the quantity frozen-garbage reclamation shrinks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..stats import mean, percentiles, step_integral
from ..units import GIB, MIB
from .load import RunData

# Instances holding memory while running nothing: kept warm (idle, frozen) or started ahead of
# demand (prewarmed "stem cells").
IDLE_STATES = ("idle", "frozen", "prewarmed")
LATENCY_PERCENTILES = (50, 90, 95, 99)


@dataclass
class FunctionMetrics:
    function: str
    invocations: int
    successes: int
    latency_ms: dict
    cold_start_rate: float | None


@dataclass
class RunMetrics:
    label: str
    invocations: int = 0
    statuses: dict = field(default_factory=dict)
    successes: int = 0
    latency_ms: dict = field(default_factory=dict)
    cold_starts: int = 0
    cold_start_rate: float | None = None
    window_s: float = 0.0
    throughput_per_s: float | None = None
    memory_mean_mib: float | None = None
    memory_peak_mib: float | None = None
    pss_mean_mib: float | None = None
    idle_gib_s: float | None = None
    lag_ms: dict = field(default_factory=dict)
    functions: list[FunctionMetrics] = field(default_factory=list)
    start_ms: float = 0.0
    end_ms: float = 0.0

    def to_json(self) -> dict:
        out = dict(self.__dict__)
        out["functions"] = [f.__dict__ for f in self.functions]
        return out


def measured_invocations(run: RunData) -> list[dict]:
    return [r for r in run.invocations if not r.get("warmup")]


def window_ms(records: list[dict]) -> tuple[float, float]:
    starts = [r.get("scheduled_ms", r.get("start_ms")) for r in records]
    starts = [s for s in starts if s is not None]
    ends = [r["end_ms"] for r in records if r.get("end_ms") is not None]
    if not starts:
        return 0.0, 0.0
    return min(starts), max(ends) if ends else max(starts)


def cold_rate(records: list[dict]) -> tuple[int, float | None]:
    kinds = Counter(r.get("start_kind") for r in records if r.get("start_kind") in ("cold", "warm"))
    total = kinds["cold"] + kinds["warm"]
    return kinds["cold"], (kinds["cold"] / total if total else None)


def memory_series(samples: list[dict], start_ms: float, end_ms: float, measure: str = "uss"):
    """(times s, total bytes, idle+frozen bytes) of the samples in [start_ms, end_ms]."""
    times, totals, idle = [], [], []
    for s in samples:
        t = s.get("t_ms")
        if t is None or t < start_ms or t > end_ms:
            continue
        rows = s.get("instances") or []
        times.append(t / 1000.0)
        totals.append(sum(r.get(measure, 0) for r in rows))
        idle.append(sum(r.get(measure, 0) for r in rows if r.get("state") in IDLE_STATES))
    return times, totals, idle


def function_metrics(records: list[dict]) -> list[FunctionMetrics]:
    by_function: dict[str, list[dict]] = {}
    for r in records:
        by_function.setdefault(r.get("function", "?"), []).append(r)
    out = []
    for name in sorted(by_function):
        group = by_function[name]
        ok = [r for r in group if r.get("status") == "success"]
        out.append(
            FunctionMetrics(
                function=name,
                invocations=len(group),
                successes=len(ok),
                latency_ms=percentiles((r["latency_ms"] for r in ok), LATENCY_PERCENTILES),
                cold_start_rate=cold_rate(group)[1],
            )
        )
    return out


def compute(run: RunData) -> RunMetrics:
    records = measured_invocations(run)
    m = RunMetrics(label=run.label, invocations=len(records))
    m.statuses = dict(Counter(r.get("status", "?") for r in records))
    ok = [r for r in records if r.get("status") == "success"]
    m.successes = len(ok)
    m.latency_ms = percentiles((r["latency_ms"] for r in ok), LATENCY_PERCENTILES)
    m.cold_starts, m.cold_start_rate = cold_rate(records)
    m.start_ms, m.end_ms = window_ms(records)
    m.window_s = max(0.0, (m.end_ms - m.start_ms) / 1000.0)
    m.throughput_per_s = m.successes / m.window_s if m.window_s > 0 else None
    lags = [r["lag_ms"] for r in records if r.get("lag_ms") is not None]
    if lags:
        m.lag_ms = {**percentiles(lags, (50, 99)), "max": max(lags)}
    if run.memory and m.window_s > 0:
        times, totals, idle = memory_series(run.memory, m.start_ms, m.end_ms)
        if times:
            m.memory_mean_mib = mean(totals) / MIB
            m.memory_peak_mib = max(totals) / MIB
            m.idle_gib_s = step_integral(times, idle, m.start_ms / 1000.0, m.end_ms / 1000.0) / GIB
        _, pss, _ = memory_series(run.memory, m.start_ms, m.end_ms, "pss")
        if pss:
            m.pss_mean_mib = mean(pss) / MIB
    m.functions = function_metrics(records)
    return m
