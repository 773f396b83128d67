"""The simulator profile (isolates_eval/sim_profile.py) from what `icebox-bench profile memalloc
--sim` measured on this machine (Node.js runtime with sharing modes, PSS, levels 1,2,4,8)."""

from __future__ import annotations

import json

import pytest
from icebox_bench.isolates_eval import sim_profile

RUNS = [
    {"cold_ms": 199.021, "warm_ms": [35.264, 17.836, 22.487, 9.412, 6.953, 11.217, 15.855, 7.481, 7.037, 6.983]},
    {"cold_ms": 170.561, "warm_ms": [41.979, 15.396, 15.554, 8.829, 6.445, 7.837, 7.591, 7.598, 7.884, 6.949]},
    {"cold_ms": 152.134, "warm_ms": [42.923, 23.364, 13.569, 18.445, 9.002, 7.301, 7.127, 7.442, 6.581, 6.67]},
]
DURATIONS = [
    31.0,
    4.0,
    21.0,
    7.0,
    6.0,
    10.0,
    15.0,
    6.0,
    6.0,
    6.0,
    41.0,
    14.0,
    15.0,
    8.0,
    5.0,
    7.0,
    7.0,
    7.0,
    7.0,
    6.0,
    42.0,
    22.0,
    13.0,
    17.0,
    8.0,
    6.0,
    7.0,
    6.0,
    6.0,
    5.0,
]
PEAKS = {
    "process": {1: 63.862, 2: 145.721, 4: 234.712, 8: 416.581},
    "shared": {1: 78.635, 2: 68.34, 4: 70.847, 8: 70.913},
    "isolate": {1: 58.962, 2: 101.268, 4: 182.316, 8: 338.94},
}
IDLE_NONE, IDLE_DESICCANT = 54409216, 16488448


def test_the_entry_reproduces_the_recorded_profile():
    entry = sim_profile.function_entry(
        runs=RUNS, warm_durations_ms=DURATIONS, peaks=PEAKS, idle_none=IDLE_NONE, idle_desiccant=IDLE_DESICCANT
    )
    # What the run wrote into its profile file.
    assert entry == {
        "cold_start_ms": 160.272,
        "warm_ms": 12.033,
        "sharing": {
            "process": {"base_mb": 51.889, "increment_mb": 21.0},
            "shared": {"base_mb": 78.635, "increment_mb": 0.0},
            "isolate": {"base_mb": 22.316, "increment_mb": 40.0},
        },
        "idle_mb": {"none": 51.889, "desiccant": 15.725},
        "runs": 3,
    }


def test_shared_and_isolate_bases_are_the_bound_at_zero_activations():
    # isolate: slope 39.53 -> 40; the bound through n=1 (58.962 - 0*40) is the highest intercept.
    entry = sim_profile.sharing_entry("isolate", PEAKS["isolate"], 51.889)
    assert entry["increment_mb"] == 40.0
    assert entry["base_mb"] + 1 * entry["increment_mb"] >= 58.962 - 1e-9
    assert all(entry["base_mb"] + n * entry["increment_mb"] >= v - 1e-9 for n, v in PEAKS["isolate"].items())


def test_process_increment_is_a_running_instance_beyond_the_idle_one():
    entry = sim_profile.sharing_entry("process", PEAKS["process"], IDLE_NONE / 2**20)
    assert entry["increment_mb"] == pytest.approx(21.0)  # ceil(145.721 / 2 - 51.889)


def test_cold_start_needs_warm_invocations():
    with pytest.raises(ValueError):
        sim_profile.cold_start_ms([{"cold_ms": 100.0, "warm_ms": []}])


def test_profile_file_has_the_spec_layout():
    entry = sim_profile.function_entry(
        runs=RUNS, warm_durations_ms=DURATIONS, peaks=PEAKS, idle_none=IDLE_NONE, idle_desiccant=IDLE_DESICCANT
    )
    doc = json.loads(json.dumps(sim_profile.profile("test", {"memalloc": entry})))
    assert doc["version"] == 1 and set(doc["functions"]["memalloc"]) == {
        "cold_start_ms",
        "warm_ms",
        "sharing",
        "idle_mb",
        "runs",
    }
