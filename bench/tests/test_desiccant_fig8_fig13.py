"""desiccant-fig8 and desiccant-fig13: their arithmetic and summary.json, on synthetic data."""

from __future__ import annotations

import pytest
from icebox_bench.desiccant_eval import fig8, fig8_render, fig13, fig13_render
from icebox_bench.units import MIB


def _mem(rss, pss, uss):
    return {"rss": int(rss * MIB), "pss": int(pss * MIB), "uss": int(uss * MIB), "swap": 0}


# ---- Fig. 8 ----------------------------------------------------------------------------


def test_fig8_point_is_the_mean_per_instance_and_the_vanilla_over_desiccant_ratio():
    p = fig8.point(2, [_mem(90, 60, 50), _mem(94, 56, 50)], [_mem(46, 14, 8), _mem(46, 16, 8)])
    assert p == {
        "instances": 2,
        "vanilla": {"rss_mb": 92.0, "pss_mb": 58.0, "uss_mb": 50.0},
        "desiccant": {"rss_mb": 46.0, "pss_mb": 15.0, "uss_mb": 8.0},
        "rss_improvement": 2.0,
        "pss_improvement": round(58 / 15, 4),
    }


def test_fig8_point_needs_every_instance_of_both_modes():
    with pytest.raises(ValueError):
        fig8.point(2, [_mem(1, 1, 1)], [_mem(1, 1, 1), _mem(1, 1, 1)])


def test_fig8_summary_orders_points_by_instance_count(tmp_path):
    points = [fig8.point(k, [_mem(90, 60, 50)] * k, [_mem(45, 15, 8)] * k) for k in (3, 1, 2)]
    summary = fig8.summary("fft", 100, points)
    assert set(summary) == {"function", "iterations", "points"}
    assert [p["instances"] for p in summary["points"]] == [1, 2, 3]
    files = fig8_render.render(tmp_path, summary)
    assert [f.name for f in files] == ["desiccant-fig8.md", "fig8_rss_pss.png"]
    assert "| 1 | 90.0 | 45.0 | 2.00 | 60.0 | 15.0 | 4.00 | 50.0 | 8.0 |" in files[0].read_text()


# ---- Fig. 13 ---------------------------------------------------------------------------


def test_fig13_slowdown_is_after_over_before_minus_one():
    e = fig13.variant_entry(
        [10.0, 10.0, 12.0, 8.0],
        [11.0, 11.0, 11.0, 11.0],
        before_latency_ms=[20.0] * 4,
        after_latency_ms=[25.0] * 4,
        report={"freed": 30 * MIB, "cpu_ms": 12.5, "wall_ms": 40.0},
    )
    assert e["before_ms"] == 10.0 and e["after_ms"] == 11.0
    assert e["slowdown"] == pytest.approx(0.1)
    assert e["latency_slowdown"] == pytest.approx(0.25)
    assert e["first_after_ms"] == 11.0 and e["freed_mb"] == 30.0 and e["reclaim_cpu_ms"] == 12.5
    assert e["median_slowdown"] == pytest.approx(0.1)  # medians 10 and 11


def test_fig13_median_slowdown_ignores_one_disturbed_invocation():
    e = fig13.variant_entry(
        [10.0] * 5, [10.0, 10.0, 10.0, 10.0, 60.0], before_latency_ms=[1.0] * 5, after_latency_ms=[1.0] * 5, report={}
    )
    assert e["slowdown"] == pytest.approx(1.0) and e["median_slowdown"] == 0.0


def _function(language, default, **slowdowns):
    return {
        "language": language,
        "default_variant": default,
        "variants": {v: {"slowdown": s} for v, s in slowdowns.items()},
    }


def test_fig13_summary_means_per_language_and_variant_and_the_default_headline(tmp_path):
    functions = {
        "fft": _function("nodejs", "low-memory", **{"low-memory": 0.30, "gc-trim": 0.02}),
        "pi": _function("nodejs", "low-memory", **{"low-memory": 0.10, "gc-trim": -0.02}),
        "sort": _function("java", "shrink", shrink=0.05, gc=0.01),
    }
    summary = fig13.summary(functions, before_runs=130, window=10)
    assert set(summary) == {"runs", "functions", "by_language", "mean_slowdown_default"}
    assert summary["runs"] == {"before": 130, "window": 10, "pause_s": 0.0}
    node = summary["by_language"]["nodejs"]
    assert node["low-memory"] == {"mean_slowdown": 0.2, "max_slowdown": 0.3, "functions": 2}
    assert node["gc-trim"]["mean_slowdown"] == pytest.approx(0.0)
    # Default variants only: (0.30 + 0.10 + 0.05) / 3
    assert summary["mean_slowdown_default"] == pytest.approx(0.15)


def test_fig13_variants_option_parses_per_language_lists():
    assert fig13.parse_variants("nodejs=low-memory, gc-trim;java=gc; ;python=") == {
        "nodejs": ["low-memory", "gc-trim"],
        "java": ["gc"],
        "python": [],
    }
    with pytest.raises(ValueError):
        fig13.parse_variants("low-memory")


def test_fig13_render(tmp_path):
    e = fig13.variant_entry([10.0], [12.0], before_latency_ms=[15.0], after_latency_ms=[17.0], report={})
    summary = fig13.summary(
        {"fft": {"language": "nodejs", "default_variant": "low-memory", "variants": {"low-memory": e}}},
        before_runs=130,
        window=1,
    )
    files = fig13_render.render(tmp_path, summary, {"pi": "failed"})
    text = files[0].read_text()
    assert "| fft | JavaScript (Node.js) | low-memory (default) | 10.0 | 12.0 | 20.0 % |" in text
    assert "**20.0 %**" in text and "pi: failed" in text
