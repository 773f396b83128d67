"""Benchmark 1: warm invocation latency through iceboxd vs a direct call to the same runtime
proxy, on the same transport (a UNIX socket), plus the same through TCP and with a thaw on
every call.

Run alone: python3 bench/node/warm_latency.py [--out FILE]
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack

from nodebench import cli, haproxy, procfs
from nodebench.actions import deploy, encode, invoke_path, nodejs_hello, python_hello
from nodebench.client import Client, Endpoint
from nodebench.daemon import Daemon
from nodebench.proxy import DirectProxy, run_body
from nodebench.report import NOT_MEASURED, Row, Section, Table, ms, ratio
from nodebench.stats import Summary, metric_sum
from nodebench.timing import Target, interleaved, time_calls

TITLE = "Warm invocation latency"
# Where a crun instance's proxy listens, inside its mount namespace
# (crates/icebox-sandbox/src/process/oci.rs).
SOCKET_INSIDE = "/run/icebox/proxy.sock"
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
from request to full response. **Baselines:** the same proxy (the command in
runtimes/<lang>/runtime.json) started bare, without iceboxd or a sandbox, `/init` with the same
code, then the same number of `POST /run` on one keep-alive connection over its UNIX socket;
and the same `POST /run` through one haproxy hop (Debian's haproxy, `mode http`, keep-alive on
both sides, UNIX socket to UNIX socket): what one well-made reverse proxy costs.
The daemon is measured twice: listening on a UNIX socket (`--listen unix:…`, the baseline's
transport: the targets are judged on this one) and on TCP 127.0.0.1. Both daemons run with
`--pause-grace 10s` so that the sequential loop never freezes the instance (checked with the
thaw counter in /metrics); the calls of all targets are interleaved in blocks of {BLOCK} so
that background load falls on all of them alike. A second part sleeps {THAW_GAP * 1000:.0f} ms
before each of {THAW_N} calls to three targets in turn: a daemon with the default 50 ms pause
grace (every call thaws a frozen instance), a daemon with `--pause-grace 10s` (the same sleeps,
nothing frozen) and the bare proxy. The sleep alone makes a call slower on these machines
(caches and idle vCPUs), bare proxy included, so the thaw's cost is the frozen − idle
difference, judged against ≤ 0.4 ms.
"""


def _daemon_target(daemon: Daemon, action: str, label: str) -> Target:
    return Target(label, daemon.client(), "POST", invoke_path(action), encode(PARAMS))


def _sandboxed_proxy(daemon: Daemon, action: str) -> Endpoint:
    """The proxy socket of the daemon's (only) instance of `action`, reached from the host
    through the instance's own root (as the daemon reaches it): the same runtime in its
    sandbox (cgroup, uid, namespaces), without the daemon in between."""
    deadline = time.monotonic() + 30
    with daemon.client() as c:
        # Its pids appear with the instance's first memory sample.
        while True:
            instances = c.get_json("/icebox/v1/instances")
            pids = [p for i in instances if i.get("action", "").endswith(f"/{action}") for p in i.get("pids") or []]
            if pids:
                return Endpoint.unix(f"/proc/{pids[0]}/root{SOCKET_INSIDE}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no instance of {action} with a pid in /icebox/v1/instances: {instances}")
            time.sleep(0.2)


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
            first = targets["unix"].client.request("POST", invoke_path(name), encode(PARAMS))
            if first.status != 200:
                raise RuntimeError(f"{name}: {first.status} {first.body[:200]!r}")
            sc = Client(_sandboxed_proxy(unix, name), None, timeout=60)
            stack.callback(sc.close)
            targets["sandboxed"] = Target(f"{ex.lang} sandboxed", sc, "POST", "/run", run_body(PARAMS, name))
            if haproxy.unavailable() is None:
                hop = stack.enter_context(haproxy.HaproxyHop(proxy.endpoint.path))
                hc = hop.client()
                stack.callback(hc.close)
                targets["haproxy"] = Target(f"{ex.lang} haproxy", hc, "POST", "/run", run_body(PARAMS, name))
            by_lang[ex.lang] = targets

        all_targets = [t for targets in by_lang.values() for t in targets.values()]
        for t in all_targets:
            first = t.client.request(t.method, t.path, t.body)
            if first.status != 200 or b"Hello, bench!" not in first.body:
                raise RuntimeError(f"{t.name}: unexpected answer {first.status} {first.body[:200]!r}")
            time_calls(t, WARMUP)
        before = {d.label: d.metrics() for d in (tcp, unix)}
        cpu_before = {d.label: procfs.cpu_seconds(d.pid) for d in (tcp, unix)}
        threads_before = {d.label: procfs.threads_by_name(d.pid) for d in (tcp, unix)}
        interleaved(all_targets, N, BLOCK)
        for d in (tcp, unix):
            cpu = procfs.cpu_seconds(d.pid) - cpu_before[d.label]
            calls = N * len(by_lang)
            section.notes.append(
                f"{d.label}: the daemon used {cpu / calls * 1000:.3f} ms of CPU per call "
                f"({cpu:.2f} s for {calls} calls, from /proc/PID/stat; 10 ms tick resolution); "
                f"by thread: {_threads_note(threads_before[d.label], procfs.threads_by_name(d.pid), calls)}."
            )
            section.notes.append(_purity_note(d, before[d.label], d.metrics()))
            section.notes.append(d.isolation_note())
        reconnects = sum(t.client.reconnects for t in all_targets)
        if reconnects:
            section.notes.append(f"{reconnects} keep-alive connection(s) had to be reopened during the loop.")
    for d in (tcp, unix):
        section.notes.append(d.stop_note())
    return {lang: {k: Summary.of_seconds(t.samples) for k, t in targets.items()} for lang, targets in by_lang.items()}


THAW_EXTRA_MS = 0.4


def thaw_met(extra_ms: float) -> bool:
    """The frozen path's target: a call to a frozen instance costs at most THAW_EXTRA_MS more
    than one to an idle unfrozen one (the p50s of `Summary`, which are in milliseconds)."""
    return extra_ms <= THAW_EXTRA_MS


def _threads_note(before: dict[str, tuple[float, int]], after: dict[str, tuple[float, int]], calls: int) -> str:
    """Where the daemon's CPU per call went, and how often each kind of thread waited (each
    wait is a sleep and a wake-up: on these virtual CPUs a wake-up costs tens of microseconds)."""
    parts = []
    for name, (cpu, waits) in sorted(after.items()):
        cpu0, waits0 = before.get(name, (0.0, 0))
        if cpu - cpu0 <= 0 and waits - waits0 <= 0:
            continue
        parts.append(f"{name} {(cpu - cpu0) / calls * 1000:.3f} ms and {(waits - waits0) / calls:.2f} waits per call")
    return "; ".join(parts) or "no thread ran"


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


def _thaw_part(section: Section) -> dict[str, dict[str, tuple[Summary, float]]]:
    """Per runtime and path: the latency distribution and the thaws the daemon counted.
    Paths: `frozen` (the default pause grace: every call thaws), `idle` (a daemon with
    --pause-grace 10s: the same sleep, nothing frozen) and `direct` (the bare proxy, the same
    sleep). The sleep itself costs a call something on these machines (caches, idle CPUs):
    only the difference to `idle` is the thaw's."""
    out: dict[str, dict[str, tuple[Summary, float]]] = {}
    with ExitStack() as stack:
        frozen = stack.enter_context(Daemon([], "unix", "iceboxd (UNIX socket, default 50 ms pause grace)"))
        idle = stack.enter_context(
            Daemon(["--pause-grace", "10s"], "unix", "iceboxd (UNIX socket, --pause-grace 10s, same sleeps)")
        )
        for ex in (python_hello(), nodejs_hello()):
            name = f"hello-{ex.lang}"
            targets: dict[str, Target] = {}
            for key, d in (("frozen", frozen), ("idle", idle)):
                with d.client() as c:
                    deploy(c, name, ex)
                targets[key] = _daemon_target(d, name, f"{ex.lang} {key}")
                stack.callback(targets[key].client.close)
            proxy = stack.enter_context(DirectProxy(ex.lang))
            pc = proxy.client()
            stack.callback(pc.close)
            proxy.init(pc, name, ex.code)
            targets["direct"] = Target(f"{ex.lang} direct", pc, "POST", "/run", run_body(PARAMS, name))
            for t in targets.values():
                time_calls(t, 5)
            before = {d.label: d.metrics() for d in (frozen, idle)}
            # Round robin, each call after its own sleep: background load falls on all alike.
            samples: dict[str, list[float]] = {key: [] for key in targets}
            for _ in range(THAW_N):
                for key, t in targets.items():
                    samples[key].extend(time_calls(t, 1, gap=THAW_GAP))
            out[ex.lang] = {
                key: (
                    Summary.of_seconds(samples[key]),
                    _counter_delta(before[d.label], d.metrics(), "icebox_thaw_seconds_count") if d else 0.0,
                )
                for key, t, d in (
                    ("frozen", targets["frozen"], frozen),
                    ("idle", targets["idle"], idle),
                    ("direct", targets["direct"], None),
                )
            }
        section.notes.append(frozen.isolation_note())
    section.notes.append(frozen.stop_note())
    section.notes.append(idle.stop_note())
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
    for lang, by_key in warm.items():
        hop = by_key.get("haproxy")
        s = by_key["unix"]
        if hop is None:
            section.rows.append(
                Row(
                    metric=f"{lang} hello p50, iceboxd vs one haproxy hop",
                    measured=ms(s.p50),
                    baseline="not measured: " + (haproxy.unavailable() or "?"),
                    ratio="",
                    target="≤ 1.5× the haproxy hop",
                    met=None,
                )
            )
            continue
        section.rows.append(
            Row(
                metric=f"{lang} hello p50, iceboxd vs one haproxy hop",
                measured=ms(s.p50),
                baseline=f"{ms(hop.p50)} (haproxy → bare proxy, UNIX sockets)",
                ratio=ratio(s.p50, hop.p50),
                target="≤ 1.5× the haproxy hop",
                met=s.p50 / hop.p50 <= 1.5,
                summary=f"{ratio(s.p50, hop.p50)} ({ms(s.p50)} vs {ms(hop.p50)} through haproxy)",
            )
        )
        dist.append(
            [
                lang,
                "haproxy → bare proxy, UNIX sockets",
                str(hop.n),
                ms(hop.p50),
                ms(hop.p90),
                ms(hop.p99),
                ms(hop.mean),
                ms(hop.max),
            ]
        )
    stages = []
    for lang, by_key in warm.items():
        bare, sandboxed, full = by_key["direct"], by_key["sandboxed"], by_key["unix"]
        hop = by_key.get("haproxy")
        stages.append(
            [
                lang,
                ms(bare.p50),
                ms(sandboxed.p50),
                ms(sandboxed.p50 - bare.p50),
                ms(hop.p50) if hop else NOT_MEASURED,
                ms(hop.p50 - bare.p50) if hop else NOT_MEASURED,
                ms(full.p50),
                ms(full.p50 - sandboxed.p50),
            ]
        )
        dist.append(
            [
                lang,
                "proxy in its sandbox, called directly",
                str(sandboxed.n),
                ms(sandboxed.p50),
                ms(sandboxed.p90),
                ms(sandboxed.p99),
                ms(sandboxed.mean),
                ms(sandboxed.max),
            ]
        )
    section.tables.append(
        Table(
            "Where a warm call's time goes (p50, UNIX sockets, interleaved in one run): the bare proxy; the"
            " same runtime in its sandbox called directly (the sandbox's cost); one haproxy hop in front of"
            " the bare proxy (a reverse proxy's cost); iceboxd (the daemon's cost over the sandboxed proxy)",
            [
                "Runtime",
                "bare proxy",
                "sandboxed proxy",
                "sandbox adds",
                "haproxy hop",
                "haproxy adds",
                "iceboxd",
                "iceboxd adds over the sandboxed proxy",
            ],
            stages,
        )
    )
    section.tables.append(
        Table(
            f"Latency distribution, N = {N} per row, --pause-grace 10s",
            ["Runtime", "Path", "n", "p50", "p90", "p99", "mean", "max"],
            dist,
        )
    )
    rows = []
    for lang, by_key in thaw.items():
        (s, thaws), (idle, _), (direct, _) = by_key["frozen"], by_key["idle"], by_key["direct"]
        extra = s.p50 - idle.p50
        section.rows.append(
            Row(
                metric=f"{lang} call to a frozen instance p50 vs an idle unfrozen one (same sleep)",
                measured=ms(s.p50),
                baseline=f"{ms(idle.p50)} (iceboxd, --pause-grace 10s, same {THAW_GAP * 1000:.0f} ms sleeps)",
                ratio=f"+{ms(extra)}" if extra >= 0 else f"−{ms(-extra)}",
                target=f"≤ idle + {THAW_EXTRA_MS} ms",
                met=thaw_met(extra),
                summary=f"{ms(s.p50)} frozen vs {ms(idle.p50)} idle (+{ms(max(extra, 0.0))})",
            )
        )
        rows.append(
            [
                lang,
                str(s.n),
                f"{thaws:.0f}",
                ms(s.p50),
                ms(s.p90),
                ms(s.p99),
                ms(idle.p50),
                ms(direct.p50),
                ms(warm[lang]["unix"].p50),
                ms(s.p50 - idle.p50),
            ]
        )
    section.tables.append(
        Table(
            f"Calls after a {THAW_GAP * 1000:.0f} ms sleep each, UNIX sockets: a frozen instance (default"
            " --pause-grace 50ms: every call thaws), an idle unfrozen one (--pause-grace 10s), the bare proxy",
            [
                "Runtime",
                "n",
                "thaws seen in /metrics",
                "frozen p50",
                "frozen p90",
                "frozen p99",
                "idle unfrozen p50",
                "bare proxy p50 (same sleeps)",
                "warm p50 without sleeps (above)",
                "frozen − idle p50",
            ],
            rows,
        )
    )
    return section


if __name__ == "__main__":
    sys.exit(cli.main_single(TITLE, WHAT, run))
