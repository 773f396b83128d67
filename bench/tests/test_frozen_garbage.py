"""The frozen-garbage arithmetic and summary.json's shape."""

from __future__ import annotations

import pytest
from icebox_bench.frozen_garbage import analysis
from icebox_bench.units import MIB


def test_ideal_adds_only_what_the_function_keeps_alive_beyond_a_bare_runtime():
    assert analysis.ideal_series(100, [10, 30, 5], baseline_live_bytes=8) == [102, 122, 100]


def test_function_summary_has_exactly_the_issue_keys():
    real = [20 * MIB, 40 * MIB]
    ideal = [10 * MIB, 10 * MIB]
    entry = analysis.function_summary("java", real, ideal)
    assert entry == {
        "language": "java",
        "avg_ratio": 3.0,
        "max_ratio": 4.0,
        "uss_mb": [20.0, 40.0],
        "ideal_mb": [10.0, 10.0],
    }


def test_by_language_averages_the_functions_ratios():
    functions = {
        "a": analysis.function_summary("java", [2, 4], [1, 1]),
        "b": analysis.function_summary("java", [1, 1], [1, 1]),
        "c": analysis.function_summary("nodejs", [3], [1]),
    }
    summary = analysis.summary(functions)
    assert set(summary) == {"functions", "by_language"}
    assert summary["by_language"]["java"] == {"avg_ratio": 2.0, "max_ratio": 2.5, "functions": 2}
    assert summary["by_language"]["nodejs"]["max_ratio"] == 3.0


def test_ratios_reject_mismatched_or_empty_ideals():
    with pytest.raises(ValueError):
        analysis.ratios([1, 2], [1])
    with pytest.raises(ValueError):
        analysis.ratios([1], [0])


def test_startup_memory_of_a_prewarmed_instance_is_its_last_runtime_ready_before_init():
    from icebox_bench.frozen_garbage.measure import startup_events

    events = [
        {"seq": 3, "kind": "created"},
        {"seq": 4, "kind": "runtime_ready", "memory": {"uss": 1}},
        {"seq": 5, "kind": "frozen"},
        {"seq": 9, "kind": "runtime_ready", "memory": {"uss": 2}, "detail": "prewarmed"},
        {"seq": 10, "kind": "init_done", "memory": {"uss": 3}},
        {"seq": 12, "kind": "runtime_ready", "memory": {"uss": 99}},  # never after init; ignored
    ]
    ready, init_done = startup_events(events)
    assert ready["memory"]["uss"] == 2 and init_done["memory"]["uss"] == 3
    assert startup_events([{"seq": 1, "kind": "runtime_ready", "memory": {"uss": 5}}])[0]["memory"]["uss"] == 5
