"""Which trace functions are high-load and low-load, and which benchmark function replays each.

FaaSMem §8.2 divides the Azure 2021 trace's functions "into two types, the high-load and the
low-load, according to their average daily invocations". Here the trace (or its window) is one
period, so a function's load is its invocation count in it: functions ranked by count (most
first, ties by name), the upper half (the extra one of an odd count included) is high-load, the
rest low-load. Each load replays the most invoked functions of its half, one per benchmark
function, so that every benchmark function runs one trace function's timestamps per load.
"""

from __future__ import annotations

from collections import Counter

from .. import mapping
from ..traces.model import TraceInvocation

LOADS = ("high", "low")


def invocation_counts(invocations: list[TraceInvocation]) -> Counter:
    return Counter(inv.function for inv in invocations)


def ranked(counts: dict[str, int]) -> list[str]:
    """Trace functions, most invoked first; ties by name (deterministic)."""
    return sorted(counts, key=lambda f: (-counts[f], f))


def split(counts: dict[str, int]) -> dict[str, list[str]]:
    """{"high": [...], "low": [...]}: the upper and lower half of the ranking."""
    order = ranked(counts)
    half = (len(order) + 1) // 2
    return {"high": order[:half], "low": order[half:]}


def map_load(trace_functions: list[str], bench_functions: list[str], *, seed: int = 0) -> dict[str, str]:
    """{trace function: benchmark function} for one load: the first len(bench_functions) of
    `trace_functions` (ranked, most invoked first) dealt to the benchmark functions by
    mapping.round_robin (a seeded shuffle): one trace function per benchmark function when the
    load has enough of them (else some benchmark functions sit this load out)."""
    if not bench_functions:
        raise mapping.MappingError("no benchmark functions to replay the trace with")
    if not trace_functions:
        raise mapping.MappingError("this load has no trace function invoked in the window")
    return mapping.round_robin(trace_functions[: len(bench_functions)], bench_functions, seed)


def plan_loads(invocations: list[TraceInvocation], bench_functions: list[str], *, seed: int = 0) -> dict[str, dict]:
    """Per load: its trace functions (ranked), the mapping, and the invocations it replays."""
    counts = invocation_counts(invocations)
    halves = split(counts)
    out = {}
    for load in LOADS:
        chosen = map_load(halves[load], bench_functions, seed=seed)
        out[load] = {
            "trace_functions": halves[load],
            "mapping": chosen,
            "invocations": {t: counts[t] for t in chosen},
            "total_invocations": sum(counts[t] for t in chosen),
        }
    return out
