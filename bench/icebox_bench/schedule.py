"""Turn trace times into the replay's send offsets.

Replay offset 0 is trace time `origin_s` (the window start). The scale factor divides
inter-arrival times (Desiccant §5.3: "if the scale factor is 10, the inter-arrival time for
functions is ten times smaller"). A warm-up of `warmup_s` replay seconds comes first and is
excluded from the results; like Desiccant's, it may run at its own scale factor, after which
the measured part continues from the trace time where the warm-up stopped. `duration_s` bounds
the measured part (replay seconds after the warm-up).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .traces.model import TraceInvocation


@dataclass(frozen=True)
class Timeline:
    origin_s: float
    scale: float = 1.0
    warmup_s: float = 0.0
    warmup_scale: float | None = None
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.scale <= 0 or (self.warmup_scale is not None and self.warmup_scale <= 0):
            raise ValueError("scale factors must be positive")
        if self.warmup_s < 0 or (self.duration_s is not None and self.duration_s <= 0):
            raise ValueError("the warm-up must be >= 0 s and the duration > 0 s")

    @property
    def _warmup_trace_span(self) -> float:
        return self.warmup_s * (self.warmup_scale or self.scale)

    def offset(self, trace_time_s: float) -> float | None:
        """Replay offset (s) of an invocation at this trace time, or None if outside the run."""
        since = trace_time_s - self.origin_s
        if since < 0:
            return None
        if since < self._warmup_trace_span:
            return since / (self.warmup_scale or self.scale)
        offset = self.warmup_s + (since - self._warmup_trace_span) / self.scale
        if self.duration_s is not None and offset >= self.warmup_s + self.duration_s:
            return None
        return offset

    def is_warmup(self, offset_s: float) -> bool:
        return offset_s < self.warmup_s


@dataclass(frozen=True)
class Scheduled:
    """One invocation to send `offset_s` seconds after the replay starts."""

    seq: int
    offset_s: float
    function: str
    trace_function: str
    trace_time_s: float
    warmup: bool


@dataclass
class Schedule:
    items: list[Scheduled]
    timeline: Timeline
    # Trace invocations left out: their trace function was not mapped (duration pairing
    # replays only the paired functions), or they fall outside the timeline.
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def measured(self) -> list[Scheduled]:
        return [s for s in self.items if not s.warmup]

    def length_s(self) -> float:
        return self.items[-1].offset_s if self.items else 0.0


def build(invocations: list[TraceInvocation], mapping: dict[str, str], timeline: Timeline) -> Schedule:
    """The schedule, sorted by offset (ties keep trace order); seq numbers follow that order."""
    unmapped = outside = 0
    timed: list[tuple[float, TraceInvocation]] = []
    for inv in invocations:
        if inv.function not in mapping:
            unmapped += 1
            continue
        offset = timeline.offset(inv.time_s)
        if offset is None:
            outside += 1
            continue
        timed.append((offset, inv))
    timed.sort(key=lambda pair: pair[0])
    items = [
        Scheduled(seq, offset, mapping[inv.function], inv.function, inv.time_s, timeline.is_warmup(offset))
        for seq, (offset, inv) in enumerate(timed)
    ]
    return Schedule(items, timeline, {"unmapped_trace_function": unmapped, "outside_timeline": outside})


def uniform(rate_per_s: float, seconds: float, functions: list[str]) -> Schedule:
    """Evenly spaced sends at `rate_per_s`, functions in turn (the lag self-check's load)."""
    if rate_per_s <= 0 or seconds <= 0 or not functions:
        raise ValueError("uniform schedule needs a positive rate, a positive length and a function")
    n = int(round(rate_per_s * seconds))
    items = [
        Scheduled(i, i / rate_per_s, functions[i % len(functions)], "uniform", i / rate_per_s, False) for i in range(n)
    ]
    return Schedule(items, Timeline(origin_s=0.0))
