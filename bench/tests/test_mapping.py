"""Trace functions onto benchmark functions."""

from __future__ import annotations

import json

import pytest
from icebox_bench.mapping import MappingError, map_functions, nearest_by_duration, pair_by_duration, round_robin

TRACE = [f"t{i:02d}" for i in range(20)]
BENCH = ["a", "b", "c"]


def test_round_robin_is_deterministic_for_a_seed_and_ignores_input_order():
    first = round_robin(TRACE, BENCH, seed=42)
    assert first == round_robin(list(reversed(TRACE)), BENCH, seed=42)
    assert set(first) == set(TRACE)
    counts = sorted(list(first.values()).count(b) for b in BENCH)
    assert counts == [6, 7, 7]  # dealt in turn


def test_round_robin_depends_on_the_seed():
    assert round_robin(TRACE, BENCH, seed=1) != round_robin(TRACE, BENCH, seed=2)


def test_pairing_takes_the_closest_durations_on_a_log_scale():
    trace = {"fast": 1.0, "mid": 95.0, "slow": 2000.0, "slower": 9000.0}
    bench = {"a": 1.5, "b": 100.0, "c": 5000.0}
    assert pair_by_duration(list(trace), trace, bench) == {"fast": "a", "mid": "b", "slower": "c"}


def test_pairing_gives_each_benchmark_function_a_distinct_trace_function():
    trace = {"x": 10.0, "y": 11.0}
    assert pair_by_duration(["x", "y"], trace, {"a": 10.0, "b": 10.0}) == {"x": "a", "y": "b"}


def test_nearest_maps_every_trace_function_and_names_an_unmappable_one():
    trace = {"t1": 2.0, "t2": 800.0}
    assert nearest_by_duration(["t1", "t2"], trace, {"a": 1.0, "b": 1000.0}) == {"t1": "a", "t2": "b"}
    with pytest.raises(MappingError, match="t3"):
        nearest_by_duration(["t1", "t3"], trace, {"a": 1.0})


def test_duration_mapping_needs_benchmark_durations():
    with pytest.raises(MappingError, match="profile"):
        map_functions("duration", ["t"], {"t": 1.0}, ["a"])
    with pytest.raises(MappingError, match="b"):
        map_functions("duration", ["t"], {"t": 1.0}, ["a", "b"], bench_durations={"a": 1.0})


def test_mapping_file(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"t1": "a", "t2": "b"}))
    assert map_functions("file", ["t1", "t2"], {}, BENCH, mapping_file=path) == {"t1": "a", "t2": "b"}
    with pytest.raises(MappingError, match="t3"):
        map_functions("file", ["t1", "t3"], {}, BENCH, mapping_file=path)
    path.write_text(json.dumps({"t1": "zzz"}))
    with pytest.raises(MappingError, match="zzz"):
        map_functions("file", ["t1"], {}, BENCH, mapping_file=path)
