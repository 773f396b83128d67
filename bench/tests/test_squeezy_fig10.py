"""squeezy-fig10's analysis (squeezy_eval/fig10.py), its protocol's pure parts and tables."""

from __future__ import annotations

import json

import pytest
from icebox_bench.manifest import load_all, select
from icebox_bench.squeezy_eval import fig10, fig10_render
from icebox_bench.squeezy_eval.fig10_run import MIB, pick_bursty, pressure_budget, vm_shared_body
from icebox_bench.traces.model import Trace, TraceInvocation

PART = 256 * MIB


def inv(fn: str, ms: float, *, status: str = "success", start: str = "warm", warmup: bool = False) -> dict:
    return {"function": fn, "latency_ms": ms, "status": status, "start_kind": start, "warmup": warmup}


def event(kind: str, t_ms: float, instance: str, seq: int, **detail) -> dict:
    return {
        "seq": seq,
        "time_ms": t_ms,
        "instance": instance,
        "action": "_/f",
        "kind": kind,
        "detail": json.dumps(detail),
    }


def run(mode: str, scenario: str, slow: float, *, events=None, plugged=None, memory=None) -> dict:
    invs = [inv("hello", 100.0 * (k + 1) * (slow if k == 99 else 1)) for k in range(100)]
    invs += [inv("pyaes", 50.0 * slow, start="cold"), inv("pyaes", 40.0), inv("hello", 1e6, warmup=True)]
    return {
        "mode": mode,
        "scenario": scenario,
        "vm_memory_bytes": None if scenario == "abundant" else 2 * PART,
        "start_ms": 10_000.0,
        "end_ms": 20_000.0,
        "invocations": invs,
        "events": events or [],
        "plugged": plugged or [],
        "memory": memory or [],
        "partition_bytes": PART,
    }


def test_latency_entry_counts_served_invocations_only():
    e = fig10.latency_entry(
        [
            inv("f", 10),
            inv("f", 30, status="application_error", start="cold"),
            inv("f", 5, status="timeout"),
            inv("f", 7, status="rejected"),
            inv("f", 999, warmup=True),
        ]
    )
    assert e["n"] == 2 and e["p50_ms"] == 20 and e["p99_ms"] == pytest.approx(29.8)
    assert e["cold"] == 1 and e["warm"] == 1 and e["timeouts"] == 1
    assert e["statuses"] == {"success": 1, "application_error": 1, "timeout": 1, "rejected": 1}
    assert e["unserved"] == 2


def test_errors_are_grouped_by_cause():
    msg = "cannot start: all 4 partitions of VM s{} hold live instances"
    e = fig10.latency_entry([{**inv("f", 9, status="http_error"), "error": msg.format(n)} for n in (2, 3)])
    assert e["errors"] == {"cannot start: all N partitions of VM sN hold live instances": 2} and e["n"] == 0


def test_errors_with_a_kind_are_grouped_by_it_not_by_their_text():
    failed = [
        {
            **inv("f", 9, status="internal_error"),
            "error": f"all 4 partitions of VM s{n} ...",
            "error_kind": "no_capacity",
        }
        for n in (2, 3)
    ]
    timed_out = {**inv("f", 9, status="http_error"), "error": "no answer before the run ended"}
    e = fig10.latency_entry([*failed, timed_out])
    assert e["errors"] == {"no_capacity": 2, "no answer before the run ended": 1}


def test_plugged_memory_from_events_with_a_stuck_unplug():
    events = [
        event("partition_plugged", 9_000, "a", 1, bytes=PART, waited_ms=0.0, booted_vm=True),
        event("partition_plugged", 12_000, "b", 2, bytes=PART, waited_ms=800.0),
        event("partition_reclaimed", 14_000, "a", 3, bytes=PART, outcome="released", unplug_ms=90.0, pages_migrated=0),
        event("partition_stuck", 15_000, "b", 4, bytes=PART, outcome="timed_out"),
        event("partition_recovered", 18_000, "b", 5, stuck_ms=3000.0),
        {"seq": 6, "time_ms": 13_000, "instance": "a", "kind": "started"},
    ]
    assert fig10.plugged_from_events(events) == [(9000.0, PART), (12000.0, 2 * PART), (14000.0, PART), (18000.0, 0.0)]
    m = fig10.memory_entry(run("squeezy", "pressure", 1.0, events=events))
    # 0.25 GiB over 10..12 s and 14..18 s, 0.5 GiB over 12..14 s.
    assert m["source"] == "events" and m["gib_s"] == pytest.approx(0.25 * 6 + 0.5 * 2)
    assert m["peak_gib"] == pytest.approx(0.5) and m["peak_bytes_run"] == 2 * PART
    assert m["plugs"] == 2 and m["plugs_waited"] == 1 and m["vm_boots"] == 1
    assert m["reclaims"] == 1 and m["reclaims_stuck"] == 1 and m["reclaims_recovered"] == 1
    assert m["unplug_ms_median"] == 90.0 and m["pages_migrated"] == 0


def test_memory_falls_back_to_the_gauge_then_the_instances():
    m = fig10.memory_entry(run("squeezy", "abundant", 1.0, plugged=[(5_000.0, PART), (15_000.0, 0.0)]))
    assert m["source"] == "metrics" and m["gib_s"] == pytest.approx(0.25 * 5)
    m = fig10.memory_entry(
        run(
            "squeezy",
            "abundant",
            1.0,
            memory=[{"t_ms": 10_000.0, "instances": [{}, {}]}, {"t_ms": 16_000.0, "instances": []}],
        )
    )
    assert m["source"] == "instances" and m["gib_s"] == pytest.approx(0.5 * 6) and m["plugs"] == 0


def test_summary_ratios_and_targets():
    waited = [event("partition_plugged", 11_000, "x", 1, bytes=PART, waited_ms=500.0)]
    runs = [
        run("squeezy", "abundant", 1.0),
        run("squeezy", "pressure", 1.1, events=waited),
        run("virtio-mem", "abundant", 1.0),
        run("virtio-mem", "pressure", 3.0, events=waited),
    ]
    s = fig10.summary(runs, functions=["hello", "pyaes"], modes=["squeezy", "virtio-mem"], accel="tcg")
    sq = s["ratios"]["squeezy"]
    assert sq["by_function"]["pyaes"] == pytest.approx((40 + 0.99 * 15) / (40 + 0.99 * 10))
    assert 1.0 < sq["by_function"]["hello"] < 1.1
    assert s["ratios"]["virtio-mem"]["p99_ratio_mean"] > sq["p99_ratio_mean"]
    assert [t["met"] for t in s["targets"]] == [True, True, True]
    assert s["runs"]["squeezy/abundant"]["functions"]["pyaes"]["cold"] == 1
    assert "TCG" in s["note"]
    json.dumps(s)


def test_missing_runs_leave_ratios_empty_and_targets_missed():
    s = fig10.summary(
        [run("squeezy", "abundant", 1.0)],
        functions=["hello"],
        modes=["squeezy"],
        accel="kvm",
        failed={"squeezy/pressure": "iceboxd did not start"},
    )
    assert s["ratios"]["squeezy"]["p99_ratio_mean"] is None
    assert not any(t["met"] for t in s["targets"])
    assert s["failed"] and s["note"] is None


def test_pick_bursty_and_budget():
    invs = [TraceInvocation(60.0 * 480 + k, "flat") for k in range(0, 600, 60)]  # 1 a minute
    invs += [TraceInvocation(60.0 * 482 + k, "burst") for k in range(12)]  # 12 in one minute
    invs += [TraceInvocation(60.0 * 483 + k, "huge") for k in range(50)]
    trace = Trace("azure2019", sorted(invs))
    assert pick_bursty(trace, 480, 10, 3, min_peak=1, max_peak=40) == ["burst"]
    assert pick_bursty(trace, 480, 10, 3, min_peak=1, max_peak=60) == ["huge", "burst"]
    assert pressure_budget(5 * PART, 0.7, PART) == 3 * PART
    assert pressure_budget(PART, 0.5, PART) == PART


def test_actions_ask_for_vm_shared():
    spec = select("hello", load_all())[0]
    body = vm_shared_body(spec, 256)
    assert body["limits"]["memory"] == 256
    assert {"key": "icebox.isolation", "value": "vm-shared"} in body["annotations"]


def test_render(tmp_path):
    runs = [run("squeezy", "abundant", 1.0), run("squeezy", "pressure", 1.2)]
    s = fig10.summary(
        runs,
        functions=["hello", "pyaes"],
        modes=["squeezy"],
        accel="tcg",
        config={"trace": "t", "scale": 5.0, "partitions": 4},
    )
    files = fig10_render.render(tmp_path, json.loads(json.dumps(s)))
    text = files[0].read_text()
    assert "squeezy/pressure" in text and "1.10x" in text
    assert files[1].stat().st_size > 0
