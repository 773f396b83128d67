"""The soak's pure parts: how answers are classified and counted, the kill choice and its
safety checks, the flags, the report."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from icebox_bench import procfs
from icebox_bench.soak import killer
from icebox_bench.soak.outcome import CONNECTION_ERROR, DAEMON_FAILURE, INSTANCE_KILLED, OK, OTHER, TIMEOUT, classify
from icebox_bench.soak.report import render
from icebox_bench.soak.run import SoakConfig, passed
from icebox_bench.soak.tally import Gauge, Kills, Tally, latency_summary


def record(status: str, result: dict, instance: str = "hello-1") -> dict:
    return {
        "activationId": "a",
        "response": {"status": status, "success": status == "success", "result": result},
        "annotations": [{"key": "kind", "value": "python:3"}, {"key": "icebox.instance", "value": instance}],
    }


KILLED = {"hello-1": "running", "sleep-2": "idle"}


def test_a_successful_activation_is_ok():
    assert classify(200, record("success", {"greeting": "hi"})).category == OK


def test_a_killed_instance_is_a_developer_error_not_a_daemon_failure():
    died = record(
        "action developer error", {"error": "The action did not produce a valid response and exited unexpectedly."}
    )
    o = classify(502, died, killed=KILLED)
    assert (o.kind, o.category) == ("502 action developer error, instance killed while running", INSTANCE_KILLED)
    assert o.message.startswith("The action did not produce")
    o = classify(502, record("action developer error", {"error": "x"}, "sleep-2"), killed=KILLED)
    assert (o.kind, o.category) == ("502 action developer error, instance killed while idle", INSTANCE_KILLED)


def test_a_developer_error_on_an_instance_the_soak_did_not_kill_is_not_excused():
    o = classify(502, record("action developer error", {"error": "x"}, "other-3"), killed=KILLED)
    assert (o.kind, o.category) == ("502 action developer error, instance not killed by the soak", OTHER)
    o = classify(502, record("action developer error", {"error": "init failed"}, ""), killed=KILLED)
    assert (o.kind, o.category) == ("502 action developer error, instance unknown", OTHER)


@pytest.mark.parametrize(
    "status, body, kind",
    [
        (500, record("whisk internal error", {"error": "boom"}), "500 whisk internal error"),
        (503, {"error": "shutting down"}, "503"),
        (502, "<html>bad gateway</html>", "502"),  # a 502 without an activation is not the action's
    ],
)
def test_5xx_other_than_the_actions_502_is_a_daemon_failure(status, body, kind):
    o = classify(status, body)
    assert (o.kind, o.category) == (kind, DAEMON_FAILURE)


def test_no_answer_is_a_daemon_failure():
    assert classify(None, "no answer within 30 s", TIMEOUT).category == DAEMON_FAILURE
    assert classify(None, "ServerDisconnectedError", CONNECTION_ERROR).kind == "connection error"


@pytest.mark.parametrize(
    "status, body, kind",
    [
        (429, {"error": "Too many requests"}, "429"),
        (202, {"activationId": "a"}, "202"),
        (502, record("application error", {"error": "bad mb"}), "502 application error"),
    ],
)
def test_throttling_slow_answers_and_application_errors_are_other(status, body, kind):
    o = classify(status, body)
    assert (o.kind, o.category) == (kind, OTHER)


def test_tally_counts_by_kind_category_and_action_with_a_few_examples():
    t = Tally()
    for i in range(5):
        t.add("hello", classify(200, record("success", {})), 0.010 + i * 0.001)
    for i in range(4):
        t.add(
            "sleep",
            classify(502, record("action developer error", {"error": f"died {i}"}, "sleep-2"), killed=KILLED),
            0.100,
        )
    t.add("hello", classify(None, "reset", CONNECTION_ERROR), 1.0)
    s = t.summary(load_seconds=2.0)
    assert s["requests"] == 10 and s["throughput_rps"] == 5.0
    assert s["by_category"] == {OK: 5, INSTANCE_KILLED: 4, DAEMON_FAILURE: 1, OTHER: 0}
    assert [(k["kind"], k["count"]) for k in s["by_kind"]] == [
        ("200 success", 5),
        ("502 action developer error, instance killed while idle", 4),
        ("connection error", 1),
    ]
    assert s["by_kind"][1]["examples"] == ["died 0", "died 1", "died 2"]
    assert s["by_action"] == {"hello": {DAEMON_FAILURE: 1, OK: 5}, "sleep": {INSTANCE_KILLED: 4}}
    assert s["ok_latency_ms"]["p50"] == 12.0 and s["ok_latency_ms"]["n"] == 5
    assert s["latency_ms"]["max"] == 1000.0


def test_latency_summary_percentiles_in_ms():
    xs = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    s = latency_summary(xs)
    assert (s["n"], s["p50"], s["p99"], s["max"]) == (100, 50.5, 99.01, 100.0)
    assert latency_summary([])["p50"] is None


def test_gauge_and_kills():
    g = Gauge()
    for v in (3, 9, 4):
        g.observe(v)
    assert (g.peak, g.samples) == (9, 3)
    k = Kills()
    k.record("a", "running")
    k.record("b", "idle")
    k.record("a", "frozen")
    k.skipped["no instance"] += 1
    assert k.as_dict() == {
        "total": 3,
        "by_state": {"frozen": 1, "idle": 1, "running": 1},
        "skipped": {"no instance": 1},
    }
    assert k.instances == {"a": "running", "b": "idle"}


def test_victims_come_only_from_listed_pids():
    views = [
        {"id": "a", "state": "idle", "pids": []},
        {"id": "b", "state": "running", "pids": [11, 12]},
        {"id": "c", "state": "frozen", "pids": [13]},
    ]
    rng = random.Random(7)
    picked = {killer.choose_victim(views, rng) for _ in range(50)}
    assert {(v.instance, v.pid) for v in picked} == {("b", 11), ("b", 12), ("c", 13)}
    assert killer.choose_victim([{"id": "a", "pids": []}], rng) is None


def test_the_killer_kills_only_the_listed_process_of_the_daemon():
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    other, child = subprocess.Popen(sleep), subprocess.Popen(sleep)
    try:
        victim = killer.Victim("x", "idle", child.pid)
        started = procfs.start_time(child.pid)
        # A process that is neither below the daemon (here: its sibling) nor in its cgroups.
        assert killer.kill(victim, started, daemon_pid=other.pid, tag="00000000") == "not the daemon's process"
        # Listed as another process (the pid was reused since the list).
        assert killer.kill(victim, started + 1, daemon_pid=procfs.os.getpid(), tag="00000000") == "gone before the kill"
        assert child.poll() is None
        assert killer.kill(victim, started, daemon_pid=procfs.os.getpid(), tag="00000000") is None
        assert child.wait(timeout=10) == -9
    finally:
        for p in (other, child):
            p.kill()
            p.wait()


def test_stat_fields_survive_a_command_with_parentheses_and_spaces():
    fields = procfs.stat_fields("123 (a) b (c) S 7 123 123 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 4242 0 0")
    assert (fields[0], fields[1], fields[11], fields[12], fields[19]) == ("S", "7", "5", "6", "4242")


@pytest.mark.parametrize(
    "kw",
    [
        {"clients": 0},
        {"duration_s": 0},
        {"duration_s": 7200},
        {"kill_interval_s": 0.01},
        {"request_timeout_s": 0},
        {"max_requests": 0},
    ],
)
def test_flags_are_bounded(kw):
    with pytest.raises(ValueError):
        SoakConfig(**kw).validate()
    SoakConfig(kill_interval_s=0).validate()  # no kills is allowed


def _result(**over) -> dict:
    t = Tally()
    t.add("hello", classify(200, record("success", {})), 0.01)
    t.add("hello", classify(502, record("action developer error", {"error": "died"}), killed=KILLED), 0.02)
    result = {
        "started_utc": "2026-01-01T00:00:00Z",
        "config": {"clients": 2, "duration_s": 1.0, "kill_interval_s": 1.0},
        "daemon": {"isolation": "crun", "cgroup": "v1", "died_during_run": False},
        "interrupted": False,
        "error": None,
        "load_seconds": 1.0,
        **t.summary(1.0),
        "kills": Kills().as_dict(),
        "daemon_rss_bytes": {"before": 10 << 20, "after": 11 << 20, "peak": 12 << 20, "samples": 3},
        "daemon_fds": {"before": 50, "after": 52, "peak": 90, "samples": 3},
        "instances_after_load": 3,
        "after_stop": {
            "stop_seconds": 0.5,
            "instance_processes_checked": 6,
            "leaked_pids": [],
            "leftover_processes": [],
            "cgroup_tag": "abcd0123",
            "cgroup_dirs_seen_during_run": True,
            "cgroup_dirs_left": [],
        },
    }
    result.update(over)
    return result


def test_verdict_and_report():
    r = _result()
    assert passed(r)
    text = render(r, passed(r))
    assert "| Requests (blocking invokes) | 2 in 1.0 s |" in text
    assert "| Daemon VmRSS before / after / peak | 10.0 MiB / 11.0 MiB / 12.0 MiB |" in text
    assert "`icebox-abcd0123` cgroup dirs (seen during the run) are gone" in text
    assert "| 502 action developer error, instance killed while running | instance killed | 1 | died |" in text
    assert "| Verdict | passed |" in text

    leaked = _result(after_stop={**r["after_stop"], "cgroup_dirs_left": ["/sys/fs/cgroup/memory/icebox-abcd0123"]})
    assert not passed(leaked)
    assert "**FAILED**" in render(leaked, passed(leaked))
    failed = _result(by_category={**r["by_category"], DAEMON_FAILURE: 1})
    assert not passed(failed)


def test_daemon_counters_are_differences_between_scrapes():
    from icebox_bench.promtext import parse_metrics
    from icebox_bench.soak.tally import daemon_counters

    before = parse_metrics(
        'icebox_invocations_total{start="warm",status="success"} 5\n'
        'icebox_invocations_total{start="cold",status="success"} 2\n'
        "icebox_rejected_total 1\n"
    )
    after = parse_metrics(
        'icebox_invocations_total{start="warm",status="success"} 105\n'
        'icebox_invocations_total{start="cold",status="success"} 12\n'
        'icebox_invocations_total{status="developer_error",start="cold"} 3\n'
        'icebox_invocations_total{start="prewarm",status="success"} 0\n'
        'icebox_evictions_total{reason="error"} 7\n'
        "icebox_rejected_total 1\n"
    )
    assert daemon_counters(before, after) == {
        "invocations_by_start": {"cold": 13, "warm": 100},
        "evictions_by_reason": {"error": 7},
        "rejected": 0,
    }


def test_an_interrupt_stops_the_load_even_when_a_client_swallows_its_cancellation():
    """The SIGINT soak test once ran its whole load after the signal: a client had lost its
    cancellation (aiohttp turns a cancel racing its timeout into TimeoutError)."""
    import asyncio

    from icebox_bench.soak.run import run_load

    async def stubborn_client(stop: asyncio.Event) -> None:
        # Like a client whose request turned the cancel into a timeout: it goes on until told.
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue

    async def scenario() -> None:
        stop = asyncio.Event()
        clients = [asyncio.create_task(stubborn_client(stop)) for _ in range(3)]
        load = asyncio.create_task(run_load(clients, stop))
        await asyncio.sleep(0.05)
        load.cancel()
        # A guard against hanging, not a timing: the old gather never ended here.
        await asyncio.wait({load}, timeout=30)
        assert load.done(), "the interrupted load is still waiting for its clients"
        assert all(t.done() for t in clients)

    asyncio.run(scenario())
