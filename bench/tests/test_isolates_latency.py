"""isolates-latency's analysis (isolates_eval/latency.py) on numbers recorded from a real run:
`icebox-bench run isolates-latency --measure-seconds 4 --warmup 1` with the Node.js runtime's
sharing modes (branch h/node), memalloc input A, client-side latency in ms."""

from __future__ import annotations

import json

import pytest

from icebox_bench.isolates_eval import latency, latency_render

P99 = {
    "process": {"1": 16.177, "2": 32.433, "4": 71.415, "8": 210.75},
    "shared": {"1": 83.729, "2": 165.162, "4": 577.697, "8": 1221.385},
    "isolate": {"1": 28.228, "2": 31.812, "4": 72.531, "8": 116.032},
}
P50 = {
    "process": {"1": 6.897, "2": 10.165, "4": 20.156, "8": 45.023},
    "shared": {"1": 45.954, "2": 101.9, "4": 257.488, "8": 378.212},
    "isolate": {"1": 8.835, "2": 12.922, "4": 23.469, "8": 51.038},
}
# The isolate instance's /stats after the levels (the runtime's `sharing` object).
STATS = {"runtime": "nodejs", "sharing": {"mode": "isolate", "capacity": 8, "in_flight": 0, "isolates": {
    "live": 8, "busy": 0, "idle": 8, "created": 8, "torn_down": 0, "crashed": 0, "timed_out": 0, "pool_target": 1,
    "start_ms": {"pool_last": 0.056, "fresh_last": 398.286, "fresh_median": 241.981, "pool_median": 1.618}}}}
# Teardown: RSS of the instance reclaimed, with an isolate holding 64 MiB of arrays, after.
RSS = (51982336, 160079872, 52269056)


def _modes() -> dict:
    return {m: {n: {"count": 100, "failures": 0, "latency_ms": {"p50": P50[m][n], "p90": None, "p99": P99[m][n],
                                                                  "max": None},
                    "duration_ms": {"p50": None, "p90": None, "p99": None, "max": None}} for n in P99[m]}
            for m in P99}


def test_p99_gain_of_isolate_over_shared_per_level():
    gains = latency.p99_gains(_modes())
    assert gains == {"1": pytest.approx(1 - 28.228 / 83.729, abs=1e-4), "2": pytest.approx(1 - 31.812 / 165.162, abs=1e-4),
                     "4": pytest.approx(1 - 72.531 / 577.697, abs=1e-4), "8": pytest.approx(1 - 116.032 / 1221.385, abs=1e-4)}


def test_start_times_come_from_the_sharing_object():
    s = latency.start_times(STATS)
    assert s["pool_median"] == 1.618 and s["fresh_median"] == 241.981 and s["created"] == 8
    assert latency.start_times({"runtime": "nodejs"}) is None


def test_teardown_share_is_of_what_the_isolate_held():
    down = latency.teardown(*RSS, hold_mb=64)
    assert down["held_mb"] == pytest.approx((RSS[1] - RSS[0]) / 2**20, abs=1e-3)
    assert down["returned"] == pytest.approx((RSS[1] - RSS[2]) / (RSS[1] - RSS[0]), abs=1e-4)
    assert latency.teardown(100, 100, 90)["returned"] is None  # nothing held


def test_targets_met_and_missed_as_measured():
    summary = latency.summary("memalloc", [1, 2, 4, 8], _modes(), latency.start_times(STATS), latency.teardown(*RSS))
    by_target = {t["target"]: t for t in summary["targets"]}
    gain = by_target["isolate p99 >= 30% better than shared at some n >= 2"]
    assert gain["met"] and gain["at"] == 8
    assert not by_target["isolate start pool_median <= 1 ms"]["met"]
    assert not by_target["isolate start fresh_median <= 20 ms"]["met"]
    assert by_target["teardown returns >= 95% of the held memory"]["met"]
    json.dumps(summary)


def test_level_entry_counts_failures_apart():
    records = [{"status": "success", "latency_ms": 6.897, "duration_ms": 3.0},
               {"status": "success", "latency_ms": 16.177, "duration_ms": 5.0},
               {"status": "application_error", "latency_ms": 1.0}]
    e = latency.level_entry(records)
    assert e["count"] == 2 and e["failures"] == 1 and e["latency_ms"]["max"] == 16.177


def test_render(tmp_path):
    summary = latency.summary("memalloc", [1, 2, 4, 8], _modes(), latency.start_times(STATS), latency.teardown(*RSS))
    files = latency_render.render(tmp_path, summary)
    assert [f.name for f in files] == ["isolates-latency.md", "isolates_latency.png"]
    assert "returned 0.997" in (tmp_path / "isolates-latency.md").read_text()
