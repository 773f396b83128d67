"""Trace time to replay offsets: scale, warm-up, duration."""

from __future__ import annotations

import pytest
from icebox_bench.schedule import Timeline, build, uniform
from icebox_bench.traces.model import TraceInvocation


def test_scale_divides_inter_arrival_times():
    tl = Timeline(origin_s=100.0, scale=10.0)
    assert tl.offset(100.0) == 0.0
    assert tl.offset(160.0) == pytest.approx(6.0)
    assert tl.offset(99.0) is None


def test_warmup_at_its_own_scale_then_the_measured_part():
    tl = Timeline(origin_s=0.0, scale=10.0, warmup_s=60.0, warmup_scale=15.0, duration_s=180.0)
    assert tl.offset(150.0) == pytest.approx(10.0) and tl.is_warmup(10.0)
    # The warm-up covers 60 s * 15 = 900 trace seconds; then 10x.
    assert tl.offset(900.0) == pytest.approx(60.0) and not tl.is_warmup(60.0)
    assert tl.offset(1000.0) == pytest.approx(70.0)
    assert tl.offset(900.0 + 1799.0) == pytest.approx(239.9)
    assert tl.offset(900.0 + 1800.0) is None  # past warm-up + duration


def test_build_orders_maps_and_flags_warmup():
    invocations = [TraceInvocation(t, f) for t, f in [(0.0, "x"), (5.0, "y"), (10.0, "x"), (20.0, "z"), (30.0, "x")]]
    sched = build(invocations, {"x": "a", "y": "b"}, Timeline(origin_s=0.0, scale=2.0, warmup_s=3.0))
    assert [(s.seq, s.offset_s, s.function, s.warmup) for s in sched.items] == [
        (0, 0.0, "a", True),
        (1, 2.5, "b", True),
        (2, 5.0, "a", False),
        (3, 15.0, "a", False),
    ]
    assert sched.dropped == {"unmapped_trace_function": 1, "outside_timeline": 0}
    assert len(sched.measured) == 2


def test_uniform_schedule():
    sched = uniform(500.0, 2.0, ["f"])
    assert len(sched.items) == 1000
    assert sched.items[1].offset_s == pytest.approx(0.002) and sched.items[-1].offset_s == pytest.approx(1.998)
