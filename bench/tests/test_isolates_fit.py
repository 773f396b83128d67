"""The isolates thesis' memory fit (isolates_eval/fit.py) and isolates-memory's summary
(isolates_eval/memory.py), on numbers recorded from real runs of the recipe on this machine."""

from __future__ import annotations

import json
import math

import pytest
from icebox_bench.isolates_eval import fit, memory, memory_render

# `icebox-bench run isolates-memory --functions fft --levels 1,2 --hold 1` (fft, before the
# sharing modes existed: all three modes ran both activations in one instance), PSS peaks, MiB.
FFT_PROCESS = {1: 79.15, 2: 88.061}
FFT_ISOLATE = {1: 87.626, 2: 71.492}


def test_increment_is_the_slope_rounded_up_and_base_the_lowest_upper_bound():
    f = fit.fit(FFT_PROCESS)
    assert f.slope_mb == pytest.approx(88.061 - 79.15)
    assert f.increment_mb == 9 == math.ceil(f.slope_mb)
    # The line through the n=1 point with slope 9 lies above n=2 (79.15 + 9 > 88.061).
    assert f.base_mb == pytest.approx(79.15)
    assert f.base0_mb == pytest.approx(70.15)
    assert all(f.limit(n) >= v - 1e-9 for n, v in FFT_PROCESS.items())


def test_a_falling_profile_costs_no_increment_and_its_base_covers_the_highest_point():
    f = fit.fit(FFT_ISOLATE)
    assert f.slope_mb < 0
    assert f.increment_mb == 0
    assert f.base_mb == pytest.approx(87.626)


# The same recipe, default levels, with the daemon's sharing modes (before the Node.js
# runtime had them: "shared" is concurrent activations in one plain process).
FFT5_PROCESS = {1: 73.057, 2: 144.286, 4: 253.209, 8: 456.398, 16: 856.21}
FFT5_SHARED = {1: 74.418, 2: 63.709, 4: 59.96, 8: 65.301, 16: 59.833}
CLOCK5_SHARED = {1: 56.688, 2: 62.756, 4: 68.95, 8: 76.428, 16: 98.84}


def test_the_bound_touches_at_least_one_point_and_exceeds_none():
    for points, increment, base in ((FFT5_PROCESS, 52, 97.209), (FFT5_SHARED, 0, 74.418), (CLOCK5_SHARED, 3, 59.95)):
        f = fit.fit(points)
        assert f.increment_mb == increment
        assert f.base_mb == pytest.approx(base, abs=1e-3)
        gaps = [f.limit(n) - v for n, v in points.items()]
        assert min(gaps) == pytest.approx(0.0, abs=1e-9)
        assert all(g >= -1e-9 for g in gaps)


def test_process_mode_grows_by_about_one_instance_per_activation():
    # n activations = n instances: the slope is one instance's memory, its base the bound at n=1.
    f = fit.fit(FFT5_PROCESS)
    assert f.slope_mb == pytest.approx(51.542, abs=1e-3)
    assert fit.crossover(f, fit.fit(FFT5_SHARED)) == 1


def test_fit_needs_a_point():
    with pytest.raises(ValueError):
        fit.fit({})


def test_crossover_is_where_the_isolate_line_meets_the_shared_one():
    # The thesis' Table 4.1, REST request: Photons 110 + 3/activation, isolate 66 + 15; the
    # text: "larger ... when there are more than 5 concurrent invocations".
    shared = fit.Fit(slope_mb=3.0, increment_mb=3, base_mb=110.0, points=5)
    isolate = fit.Fit(slope_mb=15.0, increment_mb=15, base_mb=66.0, points=5)
    assert fit.crossover(isolate, shared) == 5  # 66 + 4*15 = 126 >= 110 + 4*3 = 122
    # Memory allocator (Photons 119 + 195, isolate 76 + 21): isolate stays cheaper.
    assert fit.crossover(fit.Fit(21, 21, 76, 5), fit.Fit(195, 195, 119, 5)) is None
    assert fit.measured_crossover({1: 50, 2: 70, 4: 90}, {1: 60, 2: 65, 4: 95}) == 2


def _points(peaks: dict[int, float]) -> dict:
    return {
        str(n): {
            "peak_mb": v,
            "mean_mb": v,
            "samples": 6,
            "instances": 1,
            "in_flight_mean": float(n),
            "invocations": 10,
            "failures": 0,
        }
        for n, v in peaks.items()
    }


# The final run on main (Node.js sharing modes merged), default settings, memalloc, PSS peaks.
MEMALLOC = {
    "process": {1: 75.114, 2: 152.705, 4: 272.298, 8: 459.523, 16: 892.603},
    "shared": {1: 81.928, 2: 85.615, 4: 91.053, 8: 92.166, 16: 90.643},
    "isolate": {1: 77.027, 2: 139.09, 4: 197.719, 8: 367.801, 16: 579.922},
}


def test_function_entry_ratio_at_8_crossover_and_targets():
    entry = memory.function_entry({m: {"points": _points(p)} for m, p in MEMALLOC.items()})
    fits = {m: e["fit"] for m, e in entry["modes"].items()}
    assert (fits["process"]["increment_mb"], fits["shared"]["increment_mb"], fits["isolate"]["increment_mb"]) == (
        54,
        1,
        34,
    )
    assert fits["isolate"]["base_mb"] == pytest.approx(129.801)  # the n=8 point sets the bound
    assert entry["isolate_over_process_at_8"] == {
        "measured": pytest.approx(367.801 / 459.523, abs=1e-4),
        "fitted": pytest.approx(0.7532, abs=1e-4),
    }
    # Isolate is never cheaper than shared past one activation: one heap against one per isolate.
    assert entry["crossover"] == {"fitted": 1, "measured": 2}
    summary = memory.summary("pss", [1, 2, 4, 8, 16], {"memalloc": entry})
    assert summary["targets"] == [
        {
            "function": "memalloc",
            "target": "isolate/process memory at n=8 <= 0.6",
            "value": pytest.approx(0.8004, abs=1e-4),
            "met": False,
        }
    ]
    json.dumps(summary)


def test_level_point_takes_peak_and_mean_of_the_samples_in_mib():
    mib = 1024 * 1024
    samples = [{"instances": 2, "in_flight": 2, "pss": 100 * mib}, {"instances": 2, "in_flight": 1, "pss": 120 * mib}]
    p = memory.level_point(samples, "pss", invocations=7, failures=1)
    assert p["peak_mb"] == 120.0 and p["mean_mb"] == 110.0 and p["in_flight_mean"] == 1.5
    with pytest.raises(ValueError):
        memory.level_point([{"instances": 0, "in_flight": 0, "pss": 0}], "pss", invocations=0, failures=0)


def test_render_writes_the_tables_and_the_plot(tmp_path):
    entry = memory.function_entry(
        {"process": {"points": _points(FFT_PROCESS)}, "isolate": {"points": _points(FFT_ISOLATE)}}
    )
    files = memory_render.render(tmp_path, memory.summary("pss", [1, 2], {"fft": entry}))
    assert [f.name for f in files] == ["isolates-memory.md", "isolates_memory.png"]
    assert "| fft | process | 79.2 |" in (tmp_path / "isolates-memory.md").read_text()
