"""isolates-latency's analysis (isolates_eval/latency.py) on numbers recorded from a real run:
`icebox-bench run isolates-latency` (defaults) on main with the Node.js sharing modes, memalloc
input A, client-side latency in ms."""

from __future__ import annotations

import json

import pytest
from icebox_bench.isolates_eval import latency, latency_render

P99 = {
    "process": {"1": 11.593, "2": 13.894, "4": 87.25, "8": 148.03},
    "shared": {"1": 10.54, "2": 20.02, "4": 42.33, "8": 84.63},
    "isolate": {"1": 14.089, "2": 41.418, "4": 72.866, "8": 147.58},
}
P50 = {
    "process": {"1": 5.852, "2": 7.475, "4": 10.47, "8": 21.3},
    "shared": {"1": 6.57, "2": 11.29, "4": 22.32, "8": 40.05},
    "isolate": {"1": 7.99, "2": 13.01, "4": 26.426, "8": 49.104},
}
# The start phase's instance /stats (idle node: ten fresh starts after reclaims, ten pool starts).
STATS = {
    "runtime": "nodejs",
    "sharing": {
        "mode": "isolate",
        "capacity": 2,
        "in_flight": 0,
        "isolates": {
            "live": 1,
            "busy": 0,
            "idle": 1,
            "created": 11,
            "torn_down": 10,
            "crashed": 0,
            "timed_out": 0,
            "pool_target": 1,
            "start_ms": {"pool_last": 0.225, "fresh_last": 28.527, "fresh_median": 27.243, "pool_median": 0.201},
        },
    },
}
# Teardown: RSS of the instance reclaimed, with an isolate holding 64 MiB of arrays, after.
RSS = (51998720, 139542528, 52314112)


def _modes() -> dict:
    return {
        m: {
            n: {
                "count": 100,
                "failures": 0,
                "latency_ms": {"p50": P50[m][n], "p90": None, "p99": P99[m][n], "max": None},
                "duration_ms": {"p50": None, "p90": None, "p99": None, "max": None},
            }
            for n in P99[m]
        }
        for m in P99
    }


def test_p99_gain_of_isolate_over_shared_per_level():
    gains = latency.p99_gains(_modes())
    # Negative: isolate's tail is longer than one shared heap's at every level here.
    assert gains == {n: pytest.approx(1 - P99["isolate"][n] / P99["shared"][n], abs=1e-4) for n in P99["shared"]}
    assert all(g < 0 for g in gains.values())


def test_start_times_come_from_the_sharing_object():
    s = latency.start_times(STATS)
    assert s["pool_median"] == 0.201 and s["fresh_median"] == 27.243 and s["created"] == 11
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
    assert not gain["met"] and gain["at"] == 4  # the least bad level
    assert by_target["isolate start pool_median <= 1 ms"]["met"]
    assert not by_target["isolate start fresh_median <= 20 ms"]["met"]
    assert by_target["teardown returns >= 95% of the held memory"]["met"]
    json.dumps(summary)


def test_level_entry_counts_failures_apart():
    records = [
        {"status": "success", "latency_ms": 5.852, "duration_ms": 5.0},
        {"status": "success", "latency_ms": 16.177, "duration_ms": 11.0},
        {"status": "application_error", "latency_ms": 1.0},
    ]
    e = latency.level_entry(records)
    assert e["count"] == 2 and e["failures"] == 1 and e["latency_ms"]["max"] == 16.177


def test_render(tmp_path):
    summary = latency.summary("memalloc", [1, 2, 4, 8], _modes(), latency.start_times(STATS), latency.teardown(*RSS))
    files = latency_render.render(tmp_path, summary)
    assert [f.name for f in files] == ["isolates-latency.md", "isolates_latency.png"]
    assert "returned 0.996" in (tmp_path / "isolates-latency.md").read_text()
