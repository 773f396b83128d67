"""Small statistics used by the reports, with no dependencies so they are easy to check."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(values: Iterable[float], p: float) -> float | None:
    """The p-th percentile (0..100) with linear interpolation between closest ranks.

    Same definition as numpy.percentile's default ("linear"): for sorted x of length n the
    rank is (n - 1) * p / 100 and the result interpolates between the two neighbours.
    None for no values.
    """
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside 0..100")
    xs = sorted(values)
    if not xs:
        return None
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def percentiles(values: Iterable[float], ps: Sequence[float] = (50, 90, 95, 99)) -> dict[str, float | None]:
    xs = sorted(values)
    return {f"p{p:g}": percentile(xs, p) for p in ps}


def mean(values: Iterable[float]) -> float | None:
    xs = list(values)
    return sum(xs) / len(xs) if xs else None


def step_integral(times_s: Sequence[float], values: Sequence[float], start_s: float, end_s: float) -> float:
    """∫ value dt over [start_s, end_s] for a sampled signal held until the next sample.

    Sample i's value counts from times_s[i] to times_s[i+1] (the last one until end_s), clipped
    to the interval: what a sampler that reads a value every period can honestly claim.
    """
    total = 0.0
    for i, (t, v) in enumerate(zip(times_s, values, strict=True)):
        t_next = times_s[i + 1] if i + 1 < len(times_s) else end_s
        lo, hi = max(t, start_s), min(t_next, end_s)
        if hi > lo:
            total += v * (hi - lo)
    return total


def cdf(values: Iterable[float]) -> tuple[list[float], list[float]]:
    """(sorted values, cumulative fraction) for plotting an empirical CDF."""
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def step_mean(samples: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """Mean over [start, end) of a signal given as (t, value) samples held until the next one
    (step_integral), over the part of the interval from the first sample on; None without a
    sample inside."""
    pts = sorted(p for p in samples if p[0] < end)
    if not pts or end <= start:
        return None
    covered = end - max(start, pts[0][0])
    if covered <= 0:
        return None
    return step_integral([t for t, _ in pts], [v for _, v in pts], start, end) / covered
