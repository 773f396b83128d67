"""Percentiles and integrals used by the reports."""

from __future__ import annotations

import random

import numpy as np
import pytest
from icebox_bench.stats import cdf, mean, percentile, percentiles, step_integral


def test_percentile_interpolates_between_closest_ranks():
    xs = [4, 1, 3, 2]
    assert percentile(xs, 0) == 1 and percentile(xs, 100) == 4
    assert percentile(xs, 50) == 2.5
    assert percentile(xs, 90) == pytest.approx(3.7)
    assert percentile([7], 99) == 7
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile(xs, 101)


def test_percentile_matches_numpy_linear():
    rng = random.Random(1)
    xs = [rng.expovariate(0.1) for _ in range(1001)]
    for p in (50, 90, 95, 99, 99.9):
        assert percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)))


def test_percentiles_keys():
    assert percentiles(range(101)) == {"p50": 50, "p90": 90, "p95": 95, "p99": 99}


def test_step_integral_holds_each_sample_until_the_next():
    # 2 from t=0 to 1, 4 from 1 to 3, 1 from 3 to the end (5): 2 + 8 + 2 = 12
    assert step_integral([0, 1, 3], [2, 4, 1], 0, 5) == 12
    # clipped to [0.5, 2]: 2*0.5 + 4*1 = 5
    assert step_integral([0, 1, 3], [2, 4, 1], 0.5, 2) == 5


def test_mean_and_cdf():
    assert mean([1, 2, 3]) == 2 and mean([]) is None
    assert cdf([3, 1, 2]) == ([1, 2, 3], [1 / 3, 2 / 3, 1.0])
