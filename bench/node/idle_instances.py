"""Benchmark 5: 200 idle frozen Python instances: daemon RSS, instance USS, and the latency of
GET /icebox/v1/instances.

Run alone: python3 bench/node/idle_instances.py [--out FILE]
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from nodebench import cli, procfs
from nodebench.actions import deploy, invoke, python_hello
from nodebench.daemon import Daemon
from nodebench.report import Row, Section, Table, mib, ms, ratio
from nodebench.stats import Summary, metric_sum
from nodebench.timing import Target, time_calls

TITLE = "200 idle frozen Python instances"
INSTANCES = 200
LIST_CALLS = 50
IDLE_RSS_TARGET = 30_000_000  # 30 MB, read strictly as 10^6 bytes
FROZEN_WAIT_S = 120.0
# --pids-max 64: 256 instances of 256 processes could open more than half of fs.file-max,
# which the daemon refuses (issue 18, docs/reliability.md); 64 processes are plenty here.
FLAGS = ["--max-instances", "256", "--pids-max", "64", "--pool-memory", "8GiB"]

WHAT = f"""
A daemon started with `{" ".join(FLAGS)}` (defaults otherwise: keep-alive 10 min, pause
grace 50 ms). **Idle daemon RSS** is VmRSS from /proc/PID/status of iceboxd one second after it
answered its first health check, before any action or instance exists (target ≤ 30 MB, read as
30 × 10⁶ bytes). Then {INSTANCES} distinct Python actions (the hello example, each with its own
comment line so the code differs) are deployed and invoked once each, sequentially; the benchmark
waits until `/icebox/v1/instances` shows all {INSTANCES} instances `frozen`. Reported: the
daemon's VmRSS then, the total USS of the instances (Private_Clean + Private_Dirty from
/proc/PID/smaps_rollup, read by the benchmark for every pid the API lists, and the daemon's own
figure for comparison), and the latency of `GET /icebox/v1/instances` (median of {LIST_CALLS}
calls on one keep-alive connection), against the same call on the idle daemon.
"""


def _list_target(d: Daemon) -> Target:
    return Target("instances", d.client(), "GET", "/icebox/v1/instances", None)


def _wait_all_frozen(d: Daemon) -> tuple[list[dict], float]:
    t0 = time.monotonic()
    with d.client() as c:
        while True:
            views = c.get_json("/icebox/v1/instances")
            states = Counter(v["state"] for v in views)
            if states.get("frozen", 0) >= INSTANCES:
                return views, time.monotonic() - t0
            if time.monotonic() - t0 > FROZEN_WAIT_S:
                raise RuntimeError(
                    f"after {FROZEN_WAIT_S:.0f} s the instances are {dict(states)}, not {INSTANCES} frozen"
                )
            time.sleep(0.25)


def _uss_of(views: list[dict]) -> tuple[int, int, int]:
    """(total USS read from /proc, total USS the daemon reports, processes read)."""
    ours, theirs, n = 0, 0, 0
    for v in views:
        theirs += v["memory"]["uss"]
        for pid in v["pids"]:
            try:
                ours += procfs.uss_bytes(pid)
                n += 1
            except (FileNotFoundError, ProcessLookupError):
                pass
    return ours, theirs, n


def run() -> Section:
    section = Section(TITLE, WHAT)
    ex = python_hello()
    with Daemon(FLAGS, "tcp", "iceboxd (TCP, " + " ".join(FLAGS) + ")") as d:
        time.sleep(1.0)
        idle_rss = procfs.rss_bytes(d.pid)
        target = _list_target(d)
        with target.client:
            time_calls(target, 5)
            idle_list = Summary.of_seconds(time_calls(target, LIST_CALLS))

        with d.client() as c:
            names = [f"idle-{i:03d}" for i in range(INSTANCES)]
            for i, name in enumerate(names):
                deploy(c, name, ex, code=ex.code + f"\n# benchmark instance {i}\n")
            deployed_rss = procfs.rss_bytes(d.pid)
            t0 = time.monotonic()
            for name in names:
                invoke(c, name)
            start_s = time.monotonic() - t0
        _, frozen_wait = _wait_all_frozen(d)
        time.sleep(1.0)
        views = [v for v in _list_views(d) if v["state"] == "frozen"]
        full_rss = procfs.rss_bytes(d.pid)
        uss_ours, uss_daemon, processes = _uss_of(views)

        target = _list_target(d)
        with target.client:
            time_calls(target, 5)
            full_list = Summary.of_seconds(time_calls(target, LIST_CALLS))
            size = len(target.client.request("GET", "/icebox/v1/instances").body)
        metrics = d.metrics()
        evictions = metric_sum(metrics, "icebox_evictions_total")
        section.notes.append(d.isolation_note())
    section.notes.append(d.stop_note())

    n = len(views)
    section.rows += [
        Row(
            "idle daemon RSS (no action, no instance)",
            mib(idle_rss),
            "",
            "",
            "≤ 30 MB (28.6 MiB)",
            idle_rss <= IDLE_RSS_TARGET,
        ),
        Row(
            f"daemon RSS with {n} frozen instances",
            mib(full_rss),
            f"{mib(idle_rss)} idle",
            ratio(full_rss, idle_rss),
            "report",
        ),
        Row(
            f"total USS of the {n} frozen instances", mib(uss_ours), f"daemon's figure: {mib(uss_daemon)}", "", "report"
        ),
        Row(
            f"GET /icebox/v1/instances p50 ({n} instances)",
            ms(full_list.p50),
            f"{ms(idle_list.p50)} with 0 instances",
            ratio(full_list.p50, idle_list.p50),
            "report",
        ),
    ]
    section.tables.append(
        Table(
            "Details",
            ["Quantity", "Value"],
            [
                ["daemon RSS after deploying the actions, before any instance", mib(deployed_rss)],
                ["daemon RSS growth per frozen instance", f"{(full_rss - idle_rss) / max(n, 1) / 1024:.0f} KiB"],
                ["mean USS per frozen instance (from /proc)", mib(uss_ours / max(n, 1))],
                ["instance processes read", str(processes)],
                [f"{INSTANCES} sequential cold invocations took", f"{start_s:.1f} s"],
                ["then all frozen after", f"{frozen_wait:.1f} s"],
                ["GET /icebox/v1/instances p90 / max", f"{ms(full_list.p90)} / {ms(full_list.max)}"],
                ["GET /icebox/v1/instances body size", f"{size / 1024:.0f} KiB"],
                ["evictions during the benchmark", f"{evictions:.0f}"],
            ],
        )
    )
    return section


def _list_views(d: Daemon) -> list[dict]:
    with d.client() as c:
        return c.get_json("/icebox/v1/instances")


if __name__ == "__main__":
    sys.exit(cli.main_single(TITLE, WHAT, run))
