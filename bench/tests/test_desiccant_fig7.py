"""desiccant-fig7: summary.json's shape and the ratio arithmetic, on synthetic measurements."""

from __future__ import annotations

import json

import pytest
from icebox_bench.desiccant_eval import fig7, fig7_render
from icebox_bench.desiccant_eval.fig7_run import Measurement
from icebox_bench.units import MIB


def _entry(language, vanilla, eager, desiccant, ideal):
    return fig7.function_entry(
        language,
        vanilla=int(vanilla * MIB),
        eager=int(eager * MIB),
        desiccant=int(desiccant * MIB),
        ideal=int(ideal * MIB),
    )


@pytest.fixture
def functions():
    return {
        "sort": _entry("java", 40, 30, 10, 10),  # 4x, 3x, 1.0
        "time": _entry("java", 20, 20, 10, 8),  # 2x, 2x, 1.25
        "fft": _entry("nodejs", 60, 45, 7.5, 6),  # 8x, 6x, 1.25
    }


def test_function_entry_has_exactly_the_issue_keys_in_mib():
    entry = fig7.function_entry("java", vanilla=30 * MIB, eager=20 * MIB, desiccant=10 * MIB + MIB // 2, ideal=9 * MIB)
    assert entry == {
        "language": "java",
        "vanilla_uss_mb": 30.0,
        "eager_uss_mb": 20.0,
        "desiccant_uss_mb": 10.5,
        "ideal_uss_mb": 9.0,
    }


def test_summary_is_exactly_functions_and_by_language_with_the_three_ratios(functions):
    summary = fig7.summary(functions)
    assert set(summary) == {"functions", "by_language"}
    assert set(summary["by_language"]) == {"java", "nodejs"}
    for group in summary["by_language"].values():
        assert set(group) == {"vanilla_over_desiccant", "eager_over_desiccant", "desiccant_over_ideal"}
    json.dumps(summary)  # plain JSON


def test_language_figures_are_means_of_the_per_function_ratios(functions):
    java = fig7.summary(functions)["by_language"]["java"]
    assert java["vanilla_over_desiccant"] == pytest.approx((4 + 2) / 2)
    assert java["eager_over_desiccant"] == pytest.approx((3 + 2) / 2)
    assert java["desiccant_over_ideal"] == pytest.approx((1.0 + 1.25) / 2)
    assert fig7.summary(functions)["by_language"]["nodejs"]["vanilla_over_desiccant"] == pytest.approx(8.0)


def test_ratio_of_means_is_kept_as_a_second_reading(functions):
    agg = fig7.aggregates(functions)["java"]
    # Mean memories 30 / 10: the ratio of means is 3, the mean of ratios too here; eager differs.
    assert agg["ratio_of_means"]["vanilla_over_desiccant"] == pytest.approx(30 / 10)
    assert agg["ratio_of_means"]["eager_over_desiccant"] == pytest.approx(25 / 10)
    assert agg["geometric_mean"]["vanilla_over_desiccant"] == pytest.approx((4 * 2) ** 0.5, rel=1e-4)
    assert agg["functions"] == 2


def test_targets_compare_against_the_issue_thresholds(functions):
    rows = {(t["language"], t["target"].split()[0]): t for t in fig7.targets(fig7.summary(functions))}
    assert rows[("java", "vanilla/desiccant")]["met"] is True  # 3.0 >= 3.0
    assert rows[("java", "desiccant/ideal")]["met"] is False  # 1.125 > 1.10
    assert rows[("nodejs", "vanilla/desiccant")]["met"] is True  # 8 >= 2.5
    assert rows[("nodejs", "desiccant/ideal")]["met"] is False  # 1.25


def test_a_non_positive_figure_is_rejected():
    with pytest.raises(ValueError):
        fig7.function_entry("java", vanilla=1, eager=1, desiccant=0, ideal=1)


def test_measurement_ideals():
    m = Measurement("f", "nodejs", baseline_live_bytes=3 * MIB)
    m.runtime_ready = {"uss": 6 * MIB, "pss": 8 * MIB, "rss": 40 * MIB}
    m.live_bytes = 5 * MIB
    m.stats_before_gc = {"heap_committed_bytes": 45 * MIB}
    m.frozen = {
        "vanilla": {"uss": 60 * MIB, "rss": 90 * MIB},
        "eager": {"uss": 40 * MIB},
        "desiccant": {"uss": 10 * MIB},
    }
    # ideal = start-up + (live - bare runtime's live) = 6 + 2
    assert m.ideal() == 8 * MIB and m.ideal("rss") == 42 * MIB
    assert m.summary_entry() == {
        "language": "nodejs",
        "vanilla_uss_mb": 60.0,
        "eager_uss_mb": 40.0,
        "desiccant_uss_mb": 10.0,
        "ideal_uss_mb": 8.0,
    }
    # The paper's reading: the frozen vanilla instance less its garbage and free heap (45 - 5)
    assert m.ideal_heap_only() == 20 * MIB and m.ideal_heap_only("rss") == 50 * MIB
    # Committed heap that was never resident cannot take it below the lower bound.
    m.stats_before_gc = {"heap_committed_bytes": 200 * MIB}
    assert m.ideal_heap_only() == 8 * MIB
    m.live_bytes = 1 * MIB  # less than a bare runtime: never below the start-up memory
    assert m.ideal() == 6 * MIB
    m.stats_before_gc = {}
    with pytest.raises(ValueError):
        m.ideal_heap_only()


def test_heap_only_ratios_per_language():
    functions = {
        "a": _entry("java", 30, 20, 10, 8),
        "b": _entry("java", 30, 20, 12, 8),
        "c": _entry("nodejs", 50, 40, 10, 7),
    }
    details = {"a": {"ideal_heap_only": {"uss": 10 * MIB}}, "b": {"ideal_heap_only": {"uss": 8 * MIB}}, "c": {}}
    assert fig7.heap_only_by_language(functions, details) == {"java": pytest.approx((1.0 + 1.5) / 2)}


def test_render_writes_the_table_and_the_plot(functions, tmp_path):
    files = fig7_render.render(
        tmp_path, fig7.summary(functions), {"method": {"iterations": 100, "input": "A"}, "failed": {"pi": "boom"}}
    )
    assert [f.name for f in files] == ["desiccant-fig7.md", "fig7_memory.png"]
    text = (tmp_path / "desiccant-fig7.md").read_text()
    assert "| sort | Java | 40.0 | 30.0 | 10.0 | 10.0 | 4.00 | 3.00 | 1.00 |" in text
    assert "pi: boom" in text and (tmp_path / "fig7_memory.png").stat().st_size > 0
