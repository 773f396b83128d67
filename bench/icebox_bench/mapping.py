"""Which benchmark function stands in for which trace function.

The traces carry no code, so every trace function is replayed by one of our benchmark
functions. Modes:

* `duration` (Desiccant §5.3): each benchmark function is paired with the one trace function
  (among those invoked in the window) whose average duration is closest to its own; only the
  paired trace functions are replayed. Pairs are taken greedily, closest first.
* `duration-all`: every trace function invoked in the window is replayed by the benchmark
  function with the closest average duration. A trace function without a duration is an error.
* `round-robin`: the trace functions invoked in the window, sorted and shuffled with the
  seed, are dealt to the benchmark functions in turn.
* `file`: an explicit JSON object {trace function: benchmark function}; a trace function
  invoked in the window but missing from it is an error.

"Closest" compares durations on a log scale (|log(a/b)|): 10 ms is as far from 20 ms as 1 s
is from 2 s, which is what matters for a function's cost, and the trace spans six orders of
magnitude. Durations below 0.5 ms (the 2019 file rounds to whole ms, so 0 means "under 1 ms")
are treated as 0.5 ms.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

MODES = ("duration", "duration-all", "round-robin", "file")
_MIN_DURATION_MS = 0.5


class MappingError(ValueError):
    """A trace function cannot be mapped (its name is in the message), or bad mapping input."""


def _distance(a_ms: float, b_ms: float) -> float:
    return abs(math.log(max(a_ms, _MIN_DURATION_MS) / max(b_ms, _MIN_DURATION_MS)))


def pair_by_duration(
    trace_functions: list[str], trace_durations: dict[str, float], bench_durations: dict[str, float]
) -> dict[str, str]:
    """One distinct trace function per benchmark function, closest durations first."""
    candidates = sorted(f for f in set(trace_functions) if f in trace_durations)
    if len(candidates) < len(bench_durations):
        raise MappingError(
            f"only {len(candidates)} trace functions invoked in the window have a duration, "
            f"fewer than the {len(bench_durations)} benchmark functions to pair them with"
        )
    pairs = sorted(
        (_distance(trace_durations[t], bench_durations[b]), b, t) for b in sorted(bench_durations) for t in candidates
    )
    mapping: dict[str, str] = {}
    paired: set[str] = set()
    for _, bench, trace in pairs:
        if bench in paired or trace in mapping:
            continue
        mapping[trace] = bench
        paired.add(bench)
        if len(paired) == len(bench_durations):
            break
    return mapping


def nearest_by_duration(
    trace_functions: list[str], trace_durations: dict[str, float], bench_durations: dict[str, float]
) -> dict[str, str]:
    """Every trace function to the benchmark function with the closest duration."""
    bench = sorted(bench_durations)
    mapping = {}
    for trace in sorted(set(trace_functions)):
        if trace not in trace_durations:
            raise MappingError(
                f"trace function {trace} has no average duration in the durations file: "
                "cannot map it by duration (use --mapping round-robin or a mapping file)"
            )
        mapping[trace] = min(bench, key=lambda b: (_distance(trace_durations[trace], bench_durations[b]), b))
    return mapping


def round_robin(trace_functions: list[str], bench_functions: list[str], seed: int) -> dict[str, str]:
    """Shuffle (seeded) and deal: deterministic for a seed, whatever order the input is in."""
    if not bench_functions:
        raise MappingError("no benchmark functions to map the trace to")
    order = sorted(set(trace_functions))
    random.Random(seed).shuffle(order)
    return {trace: bench_functions[i % len(bench_functions)] for i, trace in enumerate(order)}


def from_file(path: Path, trace_functions: list[str], bench_functions: list[str]) -> dict[str, str]:
    try:
        with open(path) as f:
            given = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise MappingError(f"cannot read the mapping file {path}: {e}") from None
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise MappingError(f"{path}: expected a JSON object {{trace function: benchmark function}}")
    known = set(bench_functions)
    mapping = {}
    for trace in sorted(set(trace_functions)):
        if trace not in given:
            raise MappingError(f"trace function {trace} is invoked in the window but not in the mapping file {path}")
        if given[trace] not in known:
            raise MappingError(
                f"{path} maps trace function {trace} to {given[trace]!r}, which is not a selected benchmark function"
            )
        mapping[trace] = given[trace]
    return mapping


def map_functions(
    mode: str,
    trace_functions: list[str],
    trace_durations: dict[str, float],
    bench_functions: list[str],
    *,
    seed: int = 0,
    bench_durations: dict[str, float] | None = None,
    mapping_file: Path | None = None,
) -> dict[str, str]:
    """{trace function: benchmark function} for the trace functions that will be replayed."""
    if mode in ("duration", "duration-all"):
        if bench_durations is None:
            raise MappingError(
                f"--mapping {mode} needs the benchmark functions' average durations "
                "(run `icebox-bench profile SET -o durations.json` and pass --function-durations)"
            )
        missing = [b for b in bench_functions if b not in bench_durations]
        if missing:
            raise MappingError(
                f"no average duration for benchmark function(s) {', '.join(missing)} in the durations given"
            )
        selected = {b: bench_durations[b] for b in bench_functions}
        if mode == "duration":
            return pair_by_duration(trace_functions, trace_durations, selected)
        return nearest_by_duration(trace_functions, trace_durations, selected)
    if mode == "round-robin":
        return round_robin(trace_functions, list(bench_functions), seed)
    if mode == "file":
        if mapping_file is None:
            raise MappingError("--mapping file needs --mapping-file PATH")
        return from_file(mapping_file, trace_functions, bench_functions)
    raise MappingError(f"unknown mapping mode {mode!r}; expected one of {', '.join(MODES)}")
