"""What a loaded trace is, independent of its file format.

Times are *trace seconds*: seconds since the origin of the trace's own clock (for the 2019
dataset the start of the day, minute m starting at 60*m; for the 2021 dataset the start of
the collection). The schedule turns them into replay offsets.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class TraceInvocation:
    """One invocation of a trace function at trace time `time_s`."""

    time_s: float
    function: str


@dataclass(frozen=True)
class Window:
    """A half-open interval [start_s, end_s) of trace time; None means unbounded."""

    start_s: float | None = None
    end_s: float | None = None

    def __post_init__(self) -> None:
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"empty trace window: end {self.end_s} s is not after start {self.start_s} s")

    def contains(self, t: float) -> bool:
        if self.start_s is not None and t < self.start_s:
            return False
        if self.end_s is not None and t >= self.end_s:
            return False
        return True

    def overlaps(self, start_s: float, end_s: float) -> bool:
        """Whether [start_s, end_s) has any point inside the window."""
        lo = -math.inf if self.start_s is None else self.start_s
        hi = math.inf if self.end_s is None else self.end_s
        return start_s < hi and end_s > lo


@dataclass
class Trace:
    """Invocations (sorted by time) plus what the mapping needs about each function."""

    format: str
    invocations: list[TraceInvocation]
    # Average duration per trace function in ms (2019: the durations file; 2021: the mean of
    # the function's rows). A function without an entry cannot be mapped by duration.
    durations_ms: dict[str, float] = field(default_factory=dict)
    # Malformed input skipped while reading, by reason ("invocations: bad count", ...).
    skipped: Counter = field(default_factory=Counter)
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def functions(self) -> list[str]:
        """Trace functions with at least one invocation, in order of first appearance."""
        return list(dict.fromkeys(inv.function for inv in self.invocations))

    def skipped_total(self) -> int:
        return sum(self.skipped.values())
