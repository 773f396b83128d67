"""Percentiles of samples, and reading Prometheus text: counters and histogram quantiles."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from icebox_bench.promtext import metric_sum, parse_metrics  # noqa: F401  (nodebench.stats API)


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), p in [0, 100]."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass
class Summary:
    """A latency distribution in milliseconds."""

    n: int
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float

    @staticmethod
    def of_seconds(samples: list[float]) -> Summary:
        ms = [s * 1000.0 for s in samples]
        return Summary(
            n=len(ms),
            p50=statistics.median(ms),
            p90=percentile(ms, 90),
            p99=percentile(ms, 99),
            mean=statistics.fmean(ms),
            min=min(ms),
            max=max(ms),
        )


@dataclass
class Histogram:
    """Cumulative buckets (upper bound, count) of one Prometheus histogram."""

    buckets: list[tuple[float, float]]
    count: float
    total: float

    @staticmethod
    def from_samples(samples, name: str) -> Histogram:
        buckets = sorted(
            (float(labels["le"]), v) for n, labels, v in samples if n == name + "_bucket" and "le" in labels
        )
        return Histogram(buckets, metric_sum(samples, name + "_count"), metric_sum(samples, name + "_sum"))

    def minus(self, earlier: Histogram) -> Histogram:
        """Observations made after `earlier` was scraped."""
        before = dict(earlier.buckets)
        return Histogram(
            [(le, c - before.get(le, 0.0)) for le, c in self.buckets],
            self.count - earlier.count,
            self.total - earlier.total,
        )

    def quantile(self, q: float) -> float:
        """Like PromQL histogram_quantile: find the bucket holding rank q*count and
        interpolate linearly inside it (lower bound 0 for the first bucket)."""
        if self.count <= 0:
            raise ValueError("empty histogram")
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for le, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(le):
                    return lower_bound
                inside = cumulative - lower_count
                fraction = 0.0 if inside <= 0 else (rank - lower_count) / inside
                return lower_bound + (le - lower_bound) * fraction
            lower_bound, lower_count = le, cumulative
        return lower_bound

    def mean(self) -> float:
        return self.total / self.count if self.count else float("nan")
