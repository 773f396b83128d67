"""Percentiles of samples, and reading Prometheus text: counters and histogram quantiles."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass


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
    def of_seconds(samples: list[float]) -> "Summary":
        ms = [s * 1000.0 for s in samples]
        return Summary(
            n=len(ms), p50=statistics.median(ms), p90=percentile(ms, 90), p99=percentile(ms, 99),
            mean=statistics.fmean(ms), min=min(ms), max=max(ms),
        )


_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) for every sample line of a Prometheus / OpenMetrics text."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        samples.append((m.group("name"), labels, float(m.group("value"))))
    return samples


def metric_sum(samples, name: str, **labels: str) -> float:
    """Sum of every sample called `name` whose labels include `labels`."""
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items()))


@dataclass
class Histogram:
    """Cumulative buckets (upper bound, count) of one Prometheus histogram."""

    buckets: list[tuple[float, float]]
    count: float
    total: float

    @staticmethod
    def from_samples(samples, name: str) -> "Histogram":
        buckets = sorted(
            (float(l["le"]), v) for n, l, v in samples if n == name + "_bucket" and "le" in l
        )
        return Histogram(buckets, metric_sum(samples, name + "_count"), metric_sum(samples, name + "_sum"))

    def minus(self, earlier: "Histogram") -> "Histogram":
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
