"""faasmem-fig12's trace split into high and low load and the mapping onto benchmark functions."""

from __future__ import annotations

import pytest
from icebox_bench.faasmem_eval import loads
from icebox_bench.mapping import MappingError
from icebox_bench.traces import open_trace
from icebox_bench.traces.model import TraceInvocation

BENCH = [
    "float_operation",
    "matmul",
    "linpack",
    "image_processing",
    "chameleon",
    "pyaes",
    "gzip_compression",
    "json_dumps_loads",
    "ml_inference",
    "graph_bfs",
    "web_server",
]


def _invocations(counts: dict[str, int]) -> list[TraceInvocation]:
    return [TraceInvocation(float(i), f) for f, n in counts.items() for i in range(n)]


def test_the_upper_half_of_the_ranking_is_high_load_ties_by_name():
    counts = {"a": 1, "b": 5, "c": 5, "d": 2, "e": 9}
    assert loads.ranked(counts) == ["e", "b", "c", "d", "a"]
    assert loads.split(counts) == {"high": ["e", "b", "c"], "low": ["d", "a"]}


def test_each_load_replays_its_most_invoked_functions_one_per_benchmark_function():
    counts = {f"t{i}": 20 - i for i in range(10)}
    planned = loads.plan_loads(_invocations(counts), ["x", "y", "z"], seed=3)
    high, low = planned["high"], planned["low"]
    assert sorted(high["mapping"]) == ["t0", "t1", "t2"] and sorted(high["mapping"].values()) == ["x", "y", "z"]
    assert sorted(low["mapping"]) == ["t5", "t6", "t7"] and sorted(low["mapping"].values()) == ["x", "y", "z"]
    assert high["total_invocations"] == 20 + 19 + 18 and low["invocations"] == {"t5": 15, "t6": 14, "t7": 13}
    assert loads.plan_loads(_invocations(counts), ["x", "y", "z"], seed=3) == planned  # deterministic


def test_a_load_with_fewer_functions_than_benchmarks_leaves_some_out_and_an_empty_one_is_an_error():
    assert sorted(loads.map_load(["t1", "t2"], ["x", "y", "z"], seed=0)) == ["t1", "t2"]
    with pytest.raises(MappingError):
        loads.map_load([], ["x"])
    with pytest.raises(MappingError):
        loads.map_load(["t1"], [])


def test_the_azure_2021_sample_splits_into_16_high_and_15_low_load_functions(traces_dir):
    trace = open_trace(traces_dir / "azure2021-sample")
    counts = loads.invocation_counts(trace.invocations)
    halves = loads.split(counts)
    assert len(halves["high"]) == 16 and len(halves["low"]) == 15
    assert min(counts[f] for f in halves["high"]) >= max(counts[f] for f in halves["low"])
    planned = loads.plan_loads(trace.invocations, BENCH, seed=0)
    for load in loads.LOADS:
        assert sorted(planned[load]["mapping"].values()) == sorted(BENCH)  # one trace function each
    assert planned["high"]["total_invocations"] == 155 and planned["low"]["total_invocations"] == 19
    other = loads.plan_loads(trace.invocations, BENCH, seed=1)
    assert other["high"]["mapping"] != planned["high"]["mapping"]
    assert set(other["high"]["mapping"]) == set(planned["high"]["mapping"])
