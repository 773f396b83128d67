"""The workload of the headline run, pure: which trace hour, how fast, which trace functions,
which benchmark function each becomes.

- The hour: the 60 trace minutes with the most invocations (sim_validate.busiest_start).
- The scale: the hour is replayed in `replay_s` seconds (speed = 3600 / replay_s), and trace
  functions, shuffled with the seed, are kept while their invocations stay under `max_rate`
  per replay second (the node has 2 cores), at most `max_functions` of them (one action each,
  so instances are per trace function as in the trace). Functions invoked more than
  `max_per_function` times in the hour are left out: at speed 24 a function invoked once a
  trace second would be invoked 24 times a replay second, a burst of concurrent cold starts
  the hour never had, and one such function would take the whole budget of invocations.
- Trace times the daemon must follow are scaled by the same speed (keep-alive, the hybrid
  histogram's bin, the semi-warm start): a 10-minute keep-alive is 10 trace minutes.
- The mapping: kept trace functions, in order of first appearance, round-robin over the
  benchmark functions interleaved by runtime (python, nodejs, java, python, ...), so every
  runtime gets actions even when few functions are kept.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from ..isolates_eval import sim_validate
from ..manifest import LANGUAGES, FunctionSpec
from ..traces.model import TraceInvocation

HOUR_S = 3600.0
ACTION_PREFIX = "hl"


def interleave(specs: list[FunctionSpec]) -> list[FunctionSpec]:
    """The functions ordered python, nodejs, java, python, ... (each runtime's in given order)."""
    queues = {lang: [s for s in specs if s.language == lang] for lang in LANGUAGES}
    out: list[FunctionSpec] = []
    while any(queues.values()):
        for lang in LANGUAGES:
            if queues[lang]:
                out.append(queues[lang].pop(0))
    return out


def check_functions(specs: list[FunctionSpec], minimum: int) -> None:
    """At least `minimum` benchmark functions, every runtime among them."""
    missing = [lang for lang in LANGUAGES if not any(s.language == lang for s in specs)]
    if missing:
        raise ValueError(f"the headline run needs functions of every runtime; none of {', '.join(missing)}")
    if len(specs) < minimum:
        raise ValueError(f"the headline run needs at least {minimum} benchmark functions, got {len(specs)}")


def speed_for(window_s: float, replay_s: float) -> float:
    if window_s <= 0 or replay_s <= 0:
        raise ValueError("the window and the replay must be longer than 0 s")
    return window_s / replay_s


def scaled_ms(trace_s: float, speed: float) -> int:
    """A trace duration as the replay's milliseconds (at least 1)."""
    return max(1, round(trace_s * 1000.0 / speed))


@dataclass
class Workload:
    start_min: int
    speed: float
    replay_s: float
    kept: list[str]  # trace functions, by first appearance
    actions: dict[str, tuple[str, str]]  # trace function -> (action, benchmark function)
    invocations: list[TraceInvocation]  # the kept functions' invocations in the hour

    @property
    def origin_s(self) -> float:
        return self.start_min * 60.0

    def runtime_counts(self, specs: dict[str, FunctionSpec]) -> dict[str, int]:
        """Actions per runtime."""
        return dict(Counter(specs[b].language for _, b in self.actions.values()))

    def invocation_counts(self) -> dict[str, int]:
        """Invocations per action."""
        names = {t: a for t, (a, _) in self.actions.items()}
        return dict(Counter(names[i.function] for i in self.invocations))


def choose(
    invocations: list[TraceInvocation], budget: int, seed: int, max_functions: int, max_per_function: int
) -> list[str]:
    """Trace functions, shuffled with `seed`, kept while their invocations fit in `budget`; at
    most `max_functions`, none with more than `max_per_function` invocations."""
    counts = Counter(inv.function for inv in invocations)
    order = sorted(counts)
    random.Random(seed).shuffle(order)
    kept, total = [], 0
    for function in order:
        if len(kept) >= max_functions:
            break
        if counts[function] <= max_per_function and total + counts[function] <= budget:
            kept.append(function)
            total += counts[function]
    return kept


def plan(
    invocations: list[TraceInvocation],
    start_min: int,
    specs: list[FunctionSpec],
    *,
    replay_s: float,
    max_rate: float,
    max_functions: int,
    max_per_function: int,
    seed: int,
    window_s: float = HOUR_S,
) -> Workload:
    """The kept trace functions and their actions (`hl<k>.<function>`)."""
    speed = speed_for(window_s, replay_s)
    budget = int(max_rate * replay_s)
    chosen = choose(invocations, budget, seed, max_functions, max_per_function)
    kept = sim_validate.by_first_appearance(invocations, chosen)
    order = [s.name for s in interleave(specs)]
    actions = {
        t: (f"{ACTION_PREFIX}{k:03d}.{order[k % len(order)]}", order[k % len(order)]) for k, t in enumerate(kept)
    }
    mine = [i for i in invocations if i.function in actions]
    return Workload(start_min, speed, replay_s, kept, actions, mine)
