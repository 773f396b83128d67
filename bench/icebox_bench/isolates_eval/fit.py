"""The thesis' memory fit (§4.1.1, Fig. 4.1): a linear regression over (concurrency n, memory),
its slope rounded *up* to a whole MB is the increment, and the base is the largest intercept
that keeps the line at or above every measured point — the lowest upper bound with that slope.

The thesis writes the limit as Base + (n − 1) × Increment (Base = the memory of one activation);
icebox-policy's MemoryProfile charges base0 + n × increment (base0 = an instance running
nothing). Both are reported: `base_mb` in the thesis' convention and `base0_mb` = base − inc.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MODES = ("process", "shared", "isolate")


@dataclass(frozen=True)
class Fit:
    slope_mb: float  # the least-squares slope, MB per concurrent activation
    increment_mb: int  # ceil(slope), never negative
    base_mb: float  # the thesis' Base: the bound at n = 1
    points: int

    @property
    def base0_mb(self) -> float:
        """The bound at n = 0 (icebox-policy's MemoryProfile.base)."""
        return self.base_mb - self.increment_mb

    def limit(self, n: float) -> float:
        """The fitted upper bound at concurrency n (thesis: Base + (n − 1) × Increment)."""
        return self.base_mb + (n - 1) * self.increment_mb

    def to_json(self) -> dict:
        return {
            "slope_mb": round(self.slope_mb, 3),
            "increment_mb": self.increment_mb,
            "base_mb": round(self.base_mb, 3),
            "base0_mb": round(self.base0_mb, 3),
            "points": self.points,
        }

    @classmethod
    def from_json(cls, d: dict) -> Fit:
        return cls(slope_mb=d["slope_mb"], increment_mb=d["increment_mb"], base_mb=d["base_mb"], points=d["points"])


def least_squares_slope(ns: list[float], values: list[float]) -> float:
    mean_n = sum(ns) / len(ns)
    mean_v = sum(values) / len(values)
    var = sum((n - mean_n) ** 2 for n in ns)
    if var == 0:
        return 0.0
    return sum((n - mean_n) * (v - mean_v) for n, v in zip(ns, values, strict=True)) / var


def fit(points: dict[int, float] | list[tuple[int, float]]) -> Fit:
    """Fit {n: memory MB}; raises ValueError without any point."""
    pairs = sorted(points.items() if isinstance(points, dict) else points)
    if not pairs:
        raise ValueError("no measured point to fit")
    ns = [float(n) for n, _ in pairs]
    values = [float(v) for _, v in pairs]
    slope = least_squares_slope(ns, values)
    # A whole MB, rounded up as the thesis does; a flat or falling profile costs nothing more.
    increment = max(0, math.ceil(slope - 1e-9))
    base = max(v - (n - 1) * increment for n, v in zip(ns, values, strict=True))
    return Fit(slope_mb=slope, increment_mb=increment, base_mb=base, points=len(pairs))


def crossover(isolate: Fit, shared: Fit, n_max: int = 64) -> int | None:
    """The smallest n ≥ 1 at which the isolate bound is no longer below the shared one, or None
    if isolate stays cheaper up to n_max."""
    for n in range(1, n_max + 1):
        if isolate.limit(n) >= shared.limit(n):
            return n
    return None


def measured_crossover(isolate: dict[int, float], shared: dict[int, float]) -> int | None:
    """The smallest measured n at which isolate used at least as much as shared."""
    for n in sorted(set(isolate) & set(shared)):
        if isolate[n] >= shared[n]:
            return n
    return None
