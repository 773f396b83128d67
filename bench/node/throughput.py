"""Benchmark 2: warm throughput of a trivial Python action with 8 concurrent clients.

Run alone: python3 bench/node/throughput.py [--out FILE]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from nodebench import cli, procfs
from nodebench.actions import deploy, encode, invoke_path, python_hello
from nodebench.client import Client
from nodebench.daemon import Daemon
from nodebench.proxy import DirectProxy, run_body
from nodebench.report import Row, Section, Table, ms, ratio
from nodebench.stats import Summary, metric_sum

TITLE = "Warm throughput"
CLIENTS = 8
WARMUP_S = 3.0
MEASURE_S = 10.0
PARAMS = {"name": "bench"}

WHAT = f"""
{CLIENTS} client threads, each with its own keep-alive TCP connection, invoke the Python hello
action (`?blocking=true&result=true`) back to back: {WARMUP_S:.0f} s of warm-up (cold starts
happen here), then {MEASURE_S:.0f} s measured. The action has `limits.concurrency = 1`, so
the daemon serves concurrent calls with up to `--max-instances` (default 64) instances; how
many it used is read from `/icebox/v1/instances`. **Baseline:** the same {CLIENTS} threads,
each calling its own bare Python proxy (`POST /run` on its UNIX socket) for the same time.
The clients are Python threads on the same 2 CPUs as the daemon and the instances: the client
takes a share of the CPU in both cases, so the ratio is the useful number.
"""


@dataclass
class Worker:
    client: Client
    method: str
    path: str
    body: bytes
    samples: list[float] = field(default_factory=list)
    errors: int = 0
    error_text: str = ""

    def loop(self, start: threading.Barrier, warm_until: list[float], stop_at: list[float]) -> None:
        start.wait()
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at[0]:
                return
            try:
                reply = self.client.request(self.method, self.path, self.body)
                ok = reply.status == 200
            except OSError as e:
                ok, reply = False, None
                self.error_text = str(e)
            t1 = time.perf_counter()
            if not ok:
                self.errors += 1
                if reply is not None:
                    self.error_text = f"{reply.status} {reply.body[:200]!r}"
            elif t0 >= warm_until[0] and t1 <= stop_at[0]:
                self.samples.append(t1 - t0)


@dataclass
class Result:
    requests: int
    seconds: float
    latency: Summary
    errors: int
    error_text: str
    client_cpu: float


def drive(workers: list[Worker]) -> Result:
    """Run the workers for warm-up + measurement; count only requests started after warm-up
    and finished before the end."""
    start = threading.Barrier(len(workers) + 1)
    warm_until, stop_at = [float("inf")], [float("inf")]
    threads = [threading.Thread(target=w.loop, args=(start, warm_until, stop_at), daemon=True) for w in workers]
    for t in threads:
        t.start()
    now = time.perf_counter()
    warm_until[0] = now + WARMUP_S
    stop_at[0] = now + WARMUP_S + MEASURE_S
    cpu0 = os.times()
    start.wait()
    for t in threads:
        t.join()
    cpu1 = os.times()
    samples = [s for w in workers for s in w.samples]
    errors = sum(w.errors for w in workers)
    text = next((w.error_text for w in workers if w.error_text), "")
    if not samples:
        raise RuntimeError(f"no request succeeded ({errors} errors; last: {text})")
    client_cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return Result(len(samples), MEASURE_S, Summary.of_seconds(samples), errors, text, client_cpu)


def _daemon_run(section: Section) -> tuple[Result, int, int, float]:
    ex = python_hello()
    with Daemon([], "tcp", "iceboxd (TCP, defaults)") as d:
        with d.client() as c:
            deploy(c, "hello-python", ex, limits={"concurrency": 1})
        before = d.metrics()
        workers = [Worker(d.client(), "POST", invoke_path("hello-python"), encode(PARAMS)) for _ in range(CLIENTS)]
        with ExitStack() as stack:
            for w in workers:
                stack.callback(w.client.close)
            cpu0 = procfs.cpu_seconds(d.pid)
            result = drive(workers)
            daemon_cpu = procfs.cpu_seconds(d.pid) - cpu0
        after = d.metrics()
        with d.client() as c:
            views = [v for v in c.get_json("/icebox/v1/instances") if v["action"].endswith("/hello-python")]
        colds = metric_sum(after, "icebox_invocations_total", start="cold") - metric_sum(
            before, "icebox_invocations_total", start="cold"
        )
        thaws = metric_sum(after, "icebox_thaw_seconds_count") - metric_sum(before, "icebox_thaw_seconds_count")
        section.notes.append(
            f"{d.label}: {colds:.0f} cold start(s) and {thaws:.0f} thaw(s) over warm-up and "
            "measurement together (from /metrics)."
        )
        section.notes.append(d.isolation_note())
    section.notes.append(d.stop_note())
    return result, len(views), int(colds), daemon_cpu


def _baseline_run() -> Result:
    ex = python_hello()
    with ExitStack() as stack:
        workers = []
        for _ in range(CLIENTS):
            proxy = stack.enter_context(DirectProxy("python"))
            client = proxy.client()
            stack.callback(client.close)
            proxy.init(client, "hello-python", ex.code)
            workers.append(Worker(client, "POST", "/run", run_body(PARAMS, "hello-python")))
        return drive(workers)


def run() -> Section:
    section = Section(TITLE, WHAT)
    daemon, instances, colds, daemon_cpu = _daemon_run(section)
    base = _baseline_run()
    rps = daemon.requests / daemon.seconds
    base_rps = base.requests / base.seconds
    section.rows += [
        Row(
            "requests per second",
            f"{rps:.0f} req/s",
            f"{base_rps:.0f} req/s (8 bare proxies)",
            ratio(rps, base_rps),
            "report (no target)",
        ),
        Row("latency p50", ms(daemon.latency.p50), ms(base.latency.p50), ratio(daemon.latency.p50, base.latency.p50)),
        Row("latency p99", ms(daemon.latency.p99), ms(base.latency.p99), ratio(daemon.latency.p99, base.latency.p99)),
        Row("instances used (concurrency 1)", str(instances), f"{CLIENTS} (one proxy per client)"),
    ]
    section.tables.append(
        Table(
            f"Details ({MEASURE_S:.0f} s measured after {WARMUP_S:.0f} s warm-up)",
            ["Path", "requests", "errors", "p50", "p90", "p99", "max", "client CPU (whole run)"],
            [
                [
                    "iceboxd, TCP",
                    str(daemon.requests),
                    str(daemon.errors),
                    ms(daemon.latency.p50),
                    ms(daemon.latency.p90),
                    ms(daemon.latency.p99),
                    ms(daemon.latency.max),
                    f"{daemon.client_cpu:.1f} s",
                ],
                [
                    "bare proxies, UNIX sockets",
                    str(base.requests),
                    str(base.errors),
                    ms(base.latency.p50),
                    ms(base.latency.p90),
                    ms(base.latency.p99),
                    ms(base.latency.max),
                    f"{base.client_cpu:.1f} s",
                ],
            ],
        )
    )
    section.notes.append(
        f"iceboxd used {daemon_cpu:.1f} s of CPU over warm-up and measurement "
        f"({WARMUP_S + MEASURE_S:.0f} s of wall time, 2 CPUs shared with the clients and the instances)."
    )
    section.notes.append(f"Cold starts while warming up: {colds}; instances alive at the end: {instances}.")
    for label, r in (("iceboxd", daemon), ("baseline", base)):
        if r.errors:
            section.notes.append(f"{label}: {r.errors} request(s) failed; last: {r.error_text}")
    return section


if __name__ == "__main__":
    sys.exit(cli.main_single(TITLE, WHAT, run))
