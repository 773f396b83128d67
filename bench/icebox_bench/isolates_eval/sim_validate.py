"""sim-validate: the same invocations replayed on iceboxd and simulated by icebox-sim
(ISOLATES_SPEC §6–7), compared.

1. The busiest `window` minutes of the trace (per-minute totals, a sliding window).
2. Scaled to this node: trace functions, shuffled with the seed, are kept while the invocations
   stay under `max_rate` per replay second; each kept trace function becomes its own action
   (`sv<k>.<benchmark function>`), round-robin over the benchmark functions, so instances are
   per trace function on both sides.
3. events.csv: `time_ms,function,duration_ms` — replay time (trace time / speed), the action,
   its benchmark function's warm duration from the profile; profiles.json: the profile of
   each action (a copy of its benchmark function's), so the simulator needs no mapping.
4. Compared: cold starts, and the mean memory over the same horizon (from the first event to
   the last plus the tail): the daemon's sum of instance PSS sampled every second, the
   simulator's timeline.csv (or its summary.json's average when there is no timeline).

summary.json: {"events", "actions", "window_min", "speed", "replay": {"cold_starts", "avg_memory_mb", ...},
"sim": {...}, "difference": {"cold_starts", "avg_memory_mb"} (relative, (sim − replay) / replay),
"targets": [...]}.
"""

from __future__ import annotations

import csv
import random
import statistics
from collections import Counter
from pathlib import Path

from ..traces.model import TraceInvocation

TARGET_RELATIVE_DIFFERENCE = 0.10


def busiest_start(minute_totals: dict[int, int], length: int) -> int:
    """The first minute of the `length`-minute window with the most invocations (the earliest
    of equals)."""
    if not minute_totals:
        raise ValueError("the trace has no invocation")
    minutes = sorted(minute_totals)
    lo, hi = minutes[0], minutes[-1]
    best, best_start = -1, lo
    for start in range(lo, max(lo, hi - length + 1) + 1):
        total = sum(minute_totals.get(m, 0) for m in range(start, start + length))
        if total > best:
            best, best_start = total, start
    return best_start


def minute_totals_2019(path: Path) -> dict[int, int]:
    """Per-minute totals of an Azure 2019 invocations file, without expanding it."""
    totals: Counter = Counter()
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        columns = [(i, int(name)) for i, name in enumerate(header) if name.isdigit()]
        for row in reader:
            for i, minute in columns:
                if i < len(row) and row[i].isdigit():
                    totals[minute] += int(row[i])
    return dict(totals)


def minute_totals(invocations: list[TraceInvocation]) -> dict[int, int]:
    return dict(Counter(int(inv.time_s // 60) for inv in invocations))


def choose_functions(
    invocations: list[TraceInvocation], budget: int, seed: int, max_functions: int | None = None
) -> list[str]:
    """Trace functions, shuffled with `seed`, kept while their invocations fit in `budget`
    (and at most `max_functions`: the node's instance limit)."""
    counts = Counter(inv.function for inv in invocations)
    order = sorted(counts)
    random.Random(seed).shuffle(order)
    kept, total = [], 0
    for function in order:
        if max_functions is not None and len(kept) >= max_functions:
            break
        if total + counts[function] <= budget:
            kept.append(function)
            total += counts[function]
    return kept


def by_first_appearance(invocations: list[TraceInvocation], functions: list[str]) -> list[str]:
    """`functions` ordered by their first invocation (ties by name)."""
    first: dict[str, float] = {}
    wanted = set(functions)
    for inv in invocations:
        if inv.function in wanted and (inv.function not in first or inv.time_s < first[inv.function]):
            first[inv.function] = inv.time_s
    return sorted(functions, key=lambda f: (first.get(f, float("inf")), f))


def assign_actions(trace_functions: list[str], bench_functions: list[str]) -> dict[str, tuple[str, str]]:
    """{trace function: (action, benchmark function)}, round-robin in the given order. Given in
    order of first appearance, the action names sort in the order the simulator meets them in
    events.csv, so its `--mapping round-robin` (k-th function met → k-th profile by name) gives
    every action its own profile."""
    if not bench_functions:
        raise ValueError("no benchmark function")
    return {
        t: (f"sv{k:03d}.{bench_functions[k % len(bench_functions)]}", bench_functions[k % len(bench_functions)])
        for k, t in enumerate(trace_functions)
    }


def median_invocations(invocations: list[TraceInvocation], actions: dict) -> int:
    """The median number of invocations of the kept trace functions (at least 1): how many an
    idle instance of the replay has typically run. The median, as most run once and a mean
    would follow the few frequent ones."""
    per_function = Counter(inv.function for inv in invocations if inv.function in actions)
    return max(1, int(statistics.median_low(per_function.values()))) if per_function else 1


def events(
    invocations: list[TraceInvocation],
    actions: dict[str, tuple[str, str]],
    origin_s: float,
    speed: float,
    warm_ms: dict[str, float],
) -> list[dict]:
    """The replayed events, in time order: {"time_ms", "function" (the action), "duration_ms", "bench"}."""
    out = []
    for inv in invocations:
        if inv.function in actions:
            action, bench = actions[inv.function]
            out.append(
                {
                    "time_ms": round((inv.time_s - origin_s) / speed * 1000.0, 3),
                    "function": action,
                    "duration_ms": warm_ms[bench],
                    "bench": bench,
                }
            )
    out.sort(key=lambda e: e["time_ms"])
    return out


def write_events_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_ms", "function", "duration_ms"])
        for e in rows:
            w.writerow([e["time_ms"], e["function"], e["duration_ms"]])
    return path


def sim_profiles(
    profile: dict,
    actions: dict[str, tuple[str, str]],
    *,
    counts: dict[str, int] | None = None,
    idle_curves: dict[str, list[float]] | None = None,
    mode: str = "process",
) -> dict:
    """The profile file the simulator gets: one entry per action, its benchmark function's.

    With `idle_curves` ({function: [MiB idle after 1, 2, ... invocations]}) and `counts`
    ({trace function: invocations in the window}), each action's process-mode base and idle
    memory are its function's idle memory after as many invocations as the action runs (the last
    point of the curve beyond it): an idle instance keeps the garbage of what it ran, which the
    simulator's one figure per profile cannot follow (measured in the replay: memalloc instances
    13-43 MiB, image 13-49 MiB, by invocations run)."""
    functions = {}
    for trace_function, (action, bench) in actions.items():
        entry = profile["functions"][bench]
        curve = (idle_curves or {}).get(bench)
        if curve and counts is not None and mode == "process":
            c = max(1, counts.get(trace_function, 1))
            idle = round(curve[min(c, len(curve)) - 1], 3)
            entry = {
                **entry,
                "sharing": {**entry["sharing"], "process": {**entry["sharing"]["process"], "base_mb": idle}},
                "idle_mb": {**entry.get("idle_mb", {}), "none": idle},
            }
        functions[action] = entry
    note = "per action, its function's profile" + (
        ", idle memory after the action's invocation count"
        if idle_curves and counts is not None and mode == "process"
        else ""
    )
    return {**profile, "source": f"{profile.get('source', '')}; sim-validate: {note}", "functions": functions}


def relative(sim: float | None, replay: float | None) -> float | None:
    if sim is None or replay in (None, 0):
        return None
    return round((sim - replay) / replay, 4)


def targets(difference: dict) -> list[dict]:
    rows = []
    for key in ("cold_starts", "avg_memory_mb"):
        d = difference.get(key)
        if d is not None:
            rows.append(
                {
                    "target": f"simulated {key} within {TARGET_RELATIVE_DIFFERENCE:.0%} of the replay",
                    "value": d,
                    "met": abs(d) <= TARGET_RELATIVE_DIFFERENCE,
                }
            )
    return rows


def compare(replay: dict, sim: dict | None) -> dict:
    difference = {k: relative((sim or {}).get(k), replay.get(k)) for k in ("cold_starts", "avg_memory_mb")}
    return {"difference": difference, "targets": targets(difference)}
