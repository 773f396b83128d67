"""sim-validate's analysis (isolates_eval/sim_validate.py, sim_run.py) on the real trace
samples and small hand-written inputs."""

from __future__ import annotations

import csv
import json

import pytest
from icebox_bench import stats
from icebox_bench.isolates_eval import sim_run, sim_validate
from icebox_bench.traces import Window, open_trace
from icebox_bench.traces.model import TraceInvocation


def test_busiest_ten_minutes_of_the_samples(traces_dir):
    # Read off the samples (per-minute totals, sliding 10-minute window).
    totals = sim_validate.minute_totals_2019(traces_dir / "azure2019-sample100" / "invocations.csv")
    assert min(totals) == 480 and max(totals) == 959
    start = sim_validate.busiest_start(totals, 10)
    assert start == 865
    assert sum(totals.get(m, 0) for m in range(865, 875)) == 8770
    totals500 = sim_validate.minute_totals_2019(traces_dir / "azure2019-sample500" / "invocations.csv")
    assert sim_validate.busiest_start(totals500, 10) == 663


def test_busiest_start_prefers_the_earliest_of_equal_windows():
    assert sim_validate.busiest_start({0: 5, 1: 5, 2: 5}, 2) == 0
    assert sim_validate.busiest_start({0: 1, 1: 5, 2: 5}, 2) == 1
    with pytest.raises(ValueError):
        sim_validate.busiest_start({}, 10)


def test_expanded_totals_match_the_counts(traces_dir):
    path = traces_dir / "azure2019-sample100"
    trace = open_trace(path, window=Window(865 * 60.0, 875 * 60.0), expansion="random", seed=0)
    assert len(trace.invocations) == 8770
    assert sum(sim_validate.minute_totals(trace.invocations).values()) == 8770


def test_choose_functions_stays_under_the_budget_and_the_function_cap(traces_dir):
    trace = open_trace(traces_dir / "azure2019-sample100", window=Window(865 * 60.0, 875 * 60.0))
    kept = sim_validate.choose_functions(trace.invocations, 600, seed=0)
    counts = {f: 0 for f in kept}
    for inv in trace.invocations:
        if inv.function in counts:
            counts[inv.function] += 1
    assert 0 < sum(counts.values()) <= 600
    assert kept == sim_validate.choose_functions(trace.invocations, 600, seed=0)  # seeded
    assert len(sim_validate.choose_functions(trace.invocations, 600, seed=0, max_functions=3)) <= 3


def test_events_are_in_replay_time_with_the_profile_duration(tmp_path):
    invs = [TraceInvocation(660.0, "b"), TraceInvocation(630.0, "a"), TraceInvocation(700.0, "z")]
    actions = sim_validate.assign_actions(["a", "b"], ["filehash", "memalloc"])
    assert actions == {"a": ("sv000.filehash", "filehash"), "b": ("sv001.memalloc", "memalloc")}
    rows = sim_validate.events(invs, actions, origin_s=600.0, speed=2.0, warm_ms={"filehash": 12.5, "memalloc": 30.0})
    assert [(e["time_ms"], e["function"], e["duration_ms"]) for e in rows] == [
        (15000.0, "sv000.filehash", 12.5),
        (30000.0, "sv001.memalloc", 30.0),
    ]
    path = sim_validate.write_events_csv(tmp_path / "events.csv", rows)
    with open(path) as f:
        assert next(csv.reader(f)) == ["time_ms", "function", "duration_ms"]
    profile = {"version": 1, "source": "x", "functions": {"filehash": {"warm_ms": 12.5}, "memalloc": {"warm_ms": 30.0}}}
    per_action = sim_validate.sim_profiles(profile, actions)
    assert per_action["functions"] == {"sv000.filehash": {"warm_ms": 12.5}, "sv001.memalloc": {"warm_ms": 30.0}}


def test_step_mean_holds_each_sample_until_the_next():
    samples = [(0.0, 100.0), (1000.0, 200.0), (3000.0, 50.0)]
    assert stats.step_mean(samples, 0.0, 4000.0) == pytest.approx((100 + 2 * 200 + 50) / 4)
    assert stats.step_mean(samples, 500.0, 1500.0) == pytest.approx(150.0)
    assert stats.step_mean([], 0.0, 10.0) is None


def test_compare_gives_relative_differences_and_targets():
    out = sim_validate.compare(
        {"cold_starts": 40, "avg_memory_mb": 1000.0}, {"cold_starts": 43, "avg_memory_mb": 1200.0}
    )
    assert out["difference"] == {"cold_starts": 0.075, "avg_memory_mb": 0.2}
    assert [t["met"] for t in out["targets"]] == [True, False]
    assert sim_validate.compare({"cold_starts": 40}, None)["targets"] == []


def test_read_sim_averages_the_timeline_over_the_horizon(tmp_path):
    # The layout icebox-sim writes (crates/icebox-sim/src/output.rs).
    (tmp_path / "summary.json").write_text(
        json.dumps({"tool": "icebox-sim", "events_per_s": 1e7, "runs": [{"label": "x", "metrics": {"cold_starts": 7}}]})
    )
    (tmp_path / "timeline.csv").write_text(
        "run,second,memory_mib,active_mib,instances,busy_instances,queued\nx,0,100.0,0.0,1,0,0\nx,1,300.0,50.0,2,1,0\n"
    )
    got = sim_run.read_sim(tmp_path, horizon_ms=2000.0)
    assert got["cold_starts"] == 7 and got["avg_memory_mb"] == 200.0 and got["events_per_s"] == 1e7


def test_sim_argv_follows_the_spec_cli(tmp_path):
    argv = sim_run.sim_argv(
        tmp_path / "icebox-sim",
        tmp_path / "e.csv",
        tmp_path / "p.json",
        tmp_path / "out",
        node_memory="8GiB",
        keepalive_s=300,
        sharing="process",
        concurrency=1,
    )
    assert argv[1:5] == ["--trace", f"events:{tmp_path / 'e.csv'}", "--profiles", str(tmp_path / "p.json")]
    assert argv[5:9] == ["--mapping", "round-robin", "--nodes", "1"]
    assert "--keepalive" in argv and "ttl:300s" in argv


def test_actions_sort_in_the_order_the_simulator_meets_them():
    invs = [
        TraceInvocation(5.0, "late"),
        TraceInvocation(1.0, "early"),
        TraceInvocation(3.0, "mid"),
        TraceInvocation(0.5, "unkept"),
    ]
    order = sim_validate.by_first_appearance(invs, ["late", "mid", "early"])
    assert order == ["early", "mid", "late"]
    actions = sim_validate.assign_actions(order, ["filehash", "image"])
    names = [actions[f][0] for f in order]
    assert names == sorted(names) == ["sv000.filehash", "sv001.image", "sv002.filehash"]


def test_idle_memory_is_taken_after_the_median_count(traces_dir):
    trace = open_trace(traces_dir / "azure2019-sample100", window=Window(865 * 60.0, 875 * 60.0))
    kept = sim_validate.choose_functions(trace.invocations, 600, seed=0)
    actions = sim_validate.assign_actions(kept, ["filehash"])
    n = sim_validate.median_invocations(trace.invocations, actions)
    counts = sorted(sum(1 for inv in trace.invocations if inv.function == f) for f in kept)
    assert n == max(1, counts[(len(counts) - 1) // 2])
    assert sim_validate.median_invocations([], {}) == 1


# The start of the idle curves a sim-validate run measured (USS MiB after 1, 2, 3, 4 invocations).
CURVES = {"memalloc": [26.955, 28.967, 33.002, 38.941], "image": [13.346, 19.066, 21.357, 24.625]}


def test_each_action_gets_the_idle_memory_of_its_invocation_count():
    profile = {
        "version": 1,
        "source": "run",
        "functions": {
            f: {
                "cold_start_ms": 80.0,
                "warm_ms": 9.0,
                "sharing": {"process": {"base_mb": 30.0, "increment_mb": 15.0}},
                "idle_mb": {"none": 30.0, "desiccant": 7.0},
                "runs": 2,
            }
            for f in CURVES
        },
    }
    actions = {"a": ("sv000.memalloc", "memalloc"), "b": ("sv001.image", "image"), "c": ("sv002.memalloc", "memalloc")}
    out = sim_validate.sim_profiles(profile, actions, counts={"a": 1, "b": 3, "c": 9}, idle_curves=CURVES)
    f = out["functions"]
    assert f["sv000.memalloc"]["sharing"]["process"] == {"base_mb": 26.955, "increment_mb": 15.0}
    assert f["sv001.image"]["idle_mb"] == {"none": 21.357, "desiccant": 7.0}
    assert f["sv002.memalloc"]["sharing"]["process"]["base_mb"] == 38.941  # past the curve: its last point
    assert profile["functions"]["memalloc"]["sharing"]["process"]["base_mb"] == 30.0  # not modified
    # Shared and isolate modes keep the function's profile.
    kept = sim_validate.sim_profiles(profile, actions, counts={"a": 1}, idle_curves=CURVES, mode="isolate")
    assert kept["functions"]["sv000.memalloc"] == profile["functions"]["memalloc"]
