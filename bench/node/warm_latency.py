"""Benchmark 1: warm invocation latency through iceboxd vs a direct call to the same runtime
proxy, on the same transport (a UNIX socket), plus the same through TCP and with a thaw on
every call.

Run alone: python3 bench/node/warm_latency.py [--out FILE]
"""

from __future__ import annotations

import sys
from contextlib import ExitStack

from nodebench import cli, procfs
from nodebench.actions import deploy, encode, invoke_path, nodejs_hello, python_hello
from nodebench.daemon import Daemon
from nodebench.proxy import DirectProxy, run_body
from nodebench.report import Row, Section, Table, ms, ratio
from nodebench.stats import Summary, metric_sum
from nodebench.timing import Target, interleaved, time_calls

TITLE = "Warm invocation latency"
N = 500
WARMUP = 30
BLOCK = 50
THAW_N = 100
THAW_GAP = 0.100
PARAMS = {"name": "bench"}

WHAT = f"""
A warm, blocking `POST /api/v1/namespaces/_/actions/hello-<lang>?blocking=true&result=true`
of the example hello actions (examples/python/hello.py, examples/nodejs/hello.js): {WARMUP}
untimed calls, then {N} sequential calls on one keep-alive connection, each timed by the client
from request to full response. **Baseline:** the same proxy (the command in
runtimes/<lang>/runtime.json) started bare, without iceboxd or a sandbox, `/init` with the same
code, then the same number of `POST /run` on one keep-alive connection over its UNIX socket.
The daemon is measured twice: listening on a UNIX socket (`--listen unix:…`, the baseline's
transport: the target is judged on this one) and on TCP 127.0.0.1. Both daemons run with
`--pause-grace 10s` so that the sequential loop never freezes the instance (checked with the
thaw counter in /metrics); the calls of all six targets are interleaved in blocks of {BLOCK} so
that background load falls on all of them alike. A second part uses another daemon (UNIX
socket) with the default 50 ms pause grace and sleeps {THAW_GAP * 1000:.0f} ms before each of
{THAW_N} calls, so every call thaws a frozen instance.
"""


def _daemon_target(daemon: Daemon, action: str, label: str) -> Target:
    return Target(label, daemon.client(), "POST", invoke_path(action), encode(PARAMS))


def _warm_part(section: Section) -> dict[str, dict[str, Summary]]:
    by_lang: dict[str, dict[str, Target]] = {}
    with ExitStack() as stack:
        tcp = stack.enter_context(Daemon(["--pause-grace", "10s"], "tcp", "iceboxd (TCP, --pause-grace 10s)"))
        unix = stack.enter_context(Daemon(["--pause-grace", "10s"], "unix", "iceboxd (UNIX socket, --pause-grace 10s)"))
        for ex in (python_hello(), nodejs_hello()):
            name = f"hello-{ex.lang}"
            targets = {}
            for key, daemon in (("tcp", tcp), ("unix", unix)):
                with daemon.client() as c:
                    deploy(c, name, ex)
                targets[key] = _daemon_target(daemon, name, f"{ex.lang} via {key}")
                stack.callback(targets[key].client.close)
            proxy = stack.enter_context(DirectProxy(ex.lang))
            pc = proxy.client()
            stack.callback(pc.close)
            proxy.init(pc, name, ex.code)
            targets["direct"] = Target(f"{ex.lang} direct", pc, "POST", "/run", run_body(PARAMS, name))
            by_lang[ex.lang] = targets

        all_targets = [t for targets in by_lang.values() for t in targets.values()]
        for t in all_targets:
            first = t.client.request(t.method, t.path, t.body)
            if first.status != 200 or b"Hello, bench!" not in first.body:
                raise RuntimeError(f"{t.name}: unexpected answer {first.status} {first.body[:200]!r}")
            time_calls(t, WARMUP)
        before = {d.label: d.metrics() for d in (tcp, unix)}
        cpu_before = {d.label: procfs.cpu_seconds(d.pid) for d in (tcp, unix)}
        interleaved(all_targets, N, BLOCK)
        for d in (tcp, unix):
            cpu = procfs.cpu_seconds(d.pid) - cpu_before[d.label]
            calls = N * len(by_lang)
            section.notes.append(
                f"{d.label}: the daemon used {cpu / calls * 1000:.3f} ms of CPU per call "
                f"({cpu:.2f} s for {calls} calls, from /proc/PID/stat; 10 ms tick resolution)."
            )
            section.notes.append(_purity_note(d, before[d.label], d.metrics()))
            section.notes.append(d.isolation_note())
        reconnects = sum(t.client.reconnects for t in all_targets)
        if reconnects:
            section.notes.append(f"{reconnects} keep-alive connection(s) had to be reopened during the loop.")
    for d in (tcp, unix):
        section.notes.append(d.stop_note())
    return {lang: {k: Summary.of_seconds(t.samples) for k, t in targets.items()} for lang, targets in by_lang.items()}


def _counter_delta(before, after, name: str, **labels: str) -> float:
    return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)


def _purity_note(d: Daemon, before, after) -> str:
    thaws = _counter_delta(before, after, "icebox_thaw_seconds_count")
    colds = _counter_delta(before, after, "icebox_invocations_total", start="cold")
    if thaws or colds:
        return (
            f"{d.label}: {thaws:.0f} thaw(s) and {colds:.0f} cold start(s) happened during the timed "
            "loop: those calls were not purely warm."
        )
    return f"{d.label}: no thaw and no cold start during the timed loop (checked in /metrics)."


def _thaw_part(section: Section) -> dict[str, tuple[Summary, float]]:
    """Per runtime: the latency distribution and the thaws the daemon counted meanwhile."""
    out = {}
    with Daemon([], "unix", "iceboxd (UNIX socket, default 50 ms pause grace)") as d:
        for ex in (python_hello(), nodejs_hello()):
            name = f"hello-{ex.lang}"
            with d.client() as c:
                deploy(c, name, ex)
            target = _daemon_target(d, name, f"{ex.lang} thaw")
            with target.client:
                time_calls(target, 5)
                before = d.metrics()
                samples = time_calls(target, THAW_N, gap=THAW_GAP)
                thaws = _counter_delta(before, d.metrics(), "icebox_thaw_seconds_count")
            out[ex.lang] = (Summary.of_seconds(samples), thaws)
        section.notes.append(d.isolation_note())
    section.notes.append(d.stop_note())
    return out


def run() -> Section:
    section = Section(TITLE, WHAT)
    warm = _warm_part(section)
    thaw = _thaw_part(section)
    dist = []
    for lang, by_key in warm.items():
        direct = by_key["direct"]
        for key, label in (("unix", "iceboxd, UNIX socket"), ("tcp", "iceboxd, TCP")):
            s = by_key[key]
            judged = key == "unix"
            section.rows.append(
                Row(
                    metric=f"{lang} hello p50, {label}",
                    measured=ms(s.p50),
                    baseline=f"{ms(direct.p50)} (bare proxy, UNIX socket)",
                    ratio=ratio(s.p50, direct.p50),
                    target="≤ 1.3×" if judged else "(information: other transport)",
                    met=(s.p50 / direct.p50 <= 1.3) if judged else None,
                    summary=f"{ratio(s.p50, direct.p50)} ({ms(s.p50)} vs {ms(direct.p50)} bare)",
                )
            )
        for key, label in (
            ("unix", "iceboxd, UNIX socket"),
            ("tcp", "iceboxd, TCP 127.0.0.1"),
            ("direct", "bare proxy, UNIX socket"),
        ):
            s = by_key[key]
            dist.append([lang, label, str(s.n), ms(s.p50), ms(s.p90), ms(s.p99), ms(s.mean), ms(s.max)])
    section.tables.append(
        Table(
            f"Latency distribution, N = {N} per row, --pause-grace 10s",
            ["Runtime", "Path", "n", "p50", "p90", "p99", "mean", "max"],
            dist,
        )
    )
    rows = []
    for lang, (s, thaws) in thaw.items():
        warm_unix = warm[lang]["unix"]
        rows.append(
            [
                lang,
                str(s.n),
                f"{thaws:.0f}",
                ms(s.p50),
                ms(s.p90),
                ms(s.p99),
                ms(warm_unix.p50),
                ms(s.p50 - warm_unix.p50),
                ratio(s.p50, warm[lang]["direct"].p50),
            ]
        )
    section.tables.append(
        Table(
            f"Thaw on every call: default --pause-grace 50ms, {THAW_GAP * 1000:.0f} ms sleep before each call,"
            " UNIX socket",
            [
                "Runtime",
                "n",
                "thaws seen in /metrics",
                "p50",
                "p90",
                "p99",
                "p50 warm without thaw (above)",
                "p50 difference",
                "p50 ratio to bare proxy",
            ],
            rows,
        )
    )
    return section


if __name__ == "__main__":
    sys.exit(cli.main_single(TITLE, WHAT, run))
