"""The soak itself: a private iceboxd, a few actions, closed-loop clients invoking them
blocking for a fixed time while the killer SIGKILLs instance processes, the daemon's VmRSS and
open fds sampled throughout, and after the daemon is stopped, a check that nothing is left.

Bounded: the load stops at --duration or --max-requests, in-flight requests have at most
--request-timeout, and the daemon is always stopped (also on Ctrl-C / SIGTERM, which
`icebox-bench` turns into KeyboardInterrupt).
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from .. import leaks, procfs
from ..daemon import Daemon
from ..promtext import parse_metrics
from . import killer
from .actions import SOAK_ACTIONS, SoakAction
from .outcome import CONNECTION_ERROR, OK, TIMEOUT, classify
from .tally import Gauge, Kills, Tally, daemon_counters

SETTLE_S = 2.0


@dataclass
class SoakConfig:
    clients: int = 50
    duration_s: float = 60.0
    kill_interval_s: float = 1.0
    request_timeout_s: float = 30.0
    max_requests: int = 1_000_000
    sample_period_s: float = 0.5
    seed: int = 1
    # More iceboxd flags (the soak runs the defaults unless given).
    daemon_args: list[str] = field(default_factory=list)

    def validate(self) -> None:
        if not 1 <= self.clients <= 1000:
            raise ValueError("--clients must be between 1 and 1000")
        if not 0 < self.duration_s <= 3600:
            raise ValueError("--duration must be more than 0 and at most 3600 s")
        if self.kill_interval_s != 0 and self.kill_interval_s < 0.1:
            raise ValueError("--kill-interval must be 0 (no kills) or at least 0.1 s")
        if not 0 < self.request_timeout_s <= 600:
            raise ValueError("--request-timeout must be more than 0 and at most 600 s")
        if self.max_requests < 1:
            raise ValueError("--max-requests must be at least 1")


@dataclass
class SoakState:
    """Everything measured; filled in as the soak goes, so an interrupted run still reports."""

    tally: Tally = field(default_factory=Tally)
    kills: Kills = field(default_factory=Kills)
    rss: Gauge = field(default_factory=Gauge)
    fds: Gauge = field(default_factory=Gauge)
    seen: set = field(default_factory=set)  # (pid, start time) of every instance process listed
    cgroup_seen: bool = False
    load_seconds: float = 0.0
    instances_after: int | None = None
    counters: dict = field(default_factory=dict)
    daemon_died: bool = False
    phase: str = "starting"


def _auth_header(auth: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode("ascii")}


async def _call(session: aiohttp.ClientSession, method: str, path: str, payload=None, timeout_s: float = 30.0):
    async with session.request(method, path, json=payload, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text) if text else None
        except ValueError:
            return r.status, text


async def _scrape(session: aiohttp.ClientSession) -> list:
    async with session.get("/metrics", timeout=aiohttp.ClientTimeout(total=10)) as r:
        r.raise_for_status()
        return parse_metrics(await r.text())


async def _deploy(session: aiohttp.ClientSession, actions: list[SoakAction]) -> None:
    for a in actions:
        status, body = await _call(session, "PUT", a.path() + "?overwrite=true", a.put_body(), 120)
        if status != 200:
            raise RuntimeError(f"deploying {a.name} answered {status}: {body}")
        status, body = await _call(session, "POST", a.path() + "?blocking=true", a.params, 120)
        if classify(status, body).category != OK:
            raise RuntimeError(f"the first invocation of {a.name} answered {status}: {str(body)[:300]}")


async def _client(session, actions, weights, rng, cfg, deadline, budget, state, stop: asyncio.Event) -> None:
    while time.monotonic() < deadline and budget[0] > 0 and not stop.is_set():
        budget[0] -= 1
        action = rng.choices(actions, weights)[0]
        t0 = time.perf_counter()
        try:
            status, body = await _call(
                session, "POST", action.path() + "?blocking=true", action.params, cfg.request_timeout_s
            )
            outcome = classify(status, body, killed=state.kills.instances)
        except TimeoutError:
            outcome = classify(None, f"no answer within {cfg.request_timeout_s:g} s", TIMEOUT)
        except aiohttp.ClientError as e:
            outcome = classify(None, f"{type(e).__name__}: {e}", CONNECTION_ERROR)
        state.tally.add(action.name, outcome, time.perf_counter() - t0)


async def _killer(
    session, daemon: Daemon, cfg: SoakConfig, rng: random.Random, stop: asyncio.Event, state: SoakState
) -> None:
    tag = daemon.state_tag
    while not stop.is_set():
        wait = cfg.kill_interval_s * rng.uniform(0.5, 1.5) if cfg.kill_interval_s else 1.0
        try:
            await asyncio.wait_for(stop.wait(), wait)
            return
        except TimeoutError:
            pass
        try:
            status, views = await _call(session, "GET", "/icebox/v1/instances", timeout_s=10)
        except (TimeoutError, aiohttp.ClientError):
            state.kills.skipped["instance list failed"] += 1
            continue
        if status != 200 or not isinstance(views, list):
            state.kills.skipped[f"instance list answered {status}"] += 1
            continue
        starts = {}
        for view in views:
            for pid in view.get("pids") or []:
                starts[pid] = procfs.start_time(pid)
                if starts[pid] is not None:
                    state.seen.add((pid, starts[pid]))
                    state.cgroup_seen = state.cgroup_seen or leaks.in_daemon_cgroup(pid, tag)
        if not cfg.kill_interval_s:
            continue
        victim = killer.choose_victim(views, rng)
        if victim is None:
            state.kills.skipped["no instance"] += 1
            continue
        why_not = killer.kill(victim, starts.get(victim.pid), daemon.pid, tag)
        if why_not:
            state.kills.skipped[why_not] += 1
        else:
            state.kills.record(victim.instance, victim.state)


async def _sampler(daemon: Daemon, period_s: float, stop: asyncio.Event, state: SoakState) -> None:
    while not stop.is_set():
        try:
            state.rss.observe(procfs.rss_bytes(daemon.pid))
            state.fds.observe(procfs.fd_count(daemon.pid))
        except (OSError, KeyError):
            state.daemon_died = True
            return
        try:
            await asyncio.wait_for(stop.wait(), period_s)
        except TimeoutError:
            pass


async def run_load(clients: list[asyncio.Task], stop: asyncio.Event) -> None:
    """Wait for the clients; when interrupted (this task cancelled: SIGINT), stop them all.

    `asyncio.wait`, not `gather`: a cancelled gather waits for every child to end, and a child
    can swallow its cancellation (aiohttp turns a cancel racing its own timeout into a
    TimeoutError, which a client counts and goes on), so an interrupt could wait out the
    whole load. Clients also stop at their next request once `stop` is set."""
    try:
        await asyncio.wait(clients)
        for t in clients:
            t.result()  # a client's own failure is the run's
    finally:
        stop.set()
        for t in clients:
            t.cancel()
        await asyncio.gather(*clients, return_exceptions=True)


async def drive(daemon: Daemon, cfg: SoakConfig, state: SoakState, log) -> None:
    actions = list(SOAK_ACTIONS)
    weights = [a.weight for a in actions]
    connector = aiohttp.TCPConnector(limit=cfg.clients + 4)
    async with aiohttp.ClientSession(
        base_url=daemon.apihost, headers=_auth_header(daemon.auth), connector=connector
    ) as session:
        state.phase = "deploying"
        log(f"deploying {len(actions)} actions and invoking each once")
        await _deploy(session, actions)
        state.rss.before = procfs.rss_bytes(daemon.pid)
        state.fds.before = procfs.fd_count(daemon.pid)
        state.rss.observe(state.rss.before)
        state.fds.observe(state.fds.before)

        metrics_before = await _scrape(session)

        state.phase = "load"
        log(f"load: {cfg.clients} clients for {cfg.duration_s:g} s, a kill every ~{cfg.kill_interval_s:g} s")
        stop = asyncio.Event()
        side = [
            asyncio.create_task(_killer(session, daemon, cfg, random.Random(cfg.seed + 1), stop, state)),
            asyncio.create_task(_sampler(daemon, cfg.sample_period_s, stop, state)),
        ]
        t0 = time.monotonic()
        deadline = t0 + cfg.duration_s
        budget = [cfg.max_requests]
        clients = [
            asyncio.create_task(
                _client(
                    session, actions, weights, random.Random(cfg.seed * 1000 + i), cfg, deadline, budget, state, stop
                )
            )
            for i in range(cfg.clients)
        ]
        try:
            await run_load(clients, stop)
        finally:
            state.load_seconds = time.monotonic() - t0
            await asyncio.gather(*side, return_exceptions=True)

        state.phase = "settling"
        await asyncio.sleep(SETTLE_S)
        if daemon.proc is None or daemon.proc.poll() is not None:
            state.daemon_died = True
            return
        state.rss.after = procfs.rss_bytes(daemon.pid)
        state.fds.after = procfs.fd_count(daemon.pid)
        state.rss.observe(state.rss.after)
        state.fds.observe(state.fds.after)
        state.counters = daemon_counters(metrics_before, await _scrape(session))
        status, views = await _call(session, "GET", "/icebox/v1/instances", timeout_s=10)
        if status == 200 and isinstance(views, list):
            state.instances_after = len(views)
            state.seen.update(i for v in views for p in v.get("pids") or [] if (i := procfs.identity(p)))
    state.phase = "done"


def run(cfg: SoakConfig, out_dir: Path, log) -> tuple[dict, bool]:
    """Returns (result, interrupted). The daemon is stopped before this returns, whatever
    happened."""
    cfg.validate()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "iceboxd.log").unlink(missing_ok=True)  # the launcher appends; keep one run's log
    state = SoakState()
    interrupted = False
    error = None
    daemon = Daemon(list(cfg.daemon_args), log_path=out_dir / "iceboxd.log")
    started = time.time()
    try:
        daemon.start()
        log(f"iceboxd pid {daemon.pid} at {daemon.apihost}, isolation {daemon.health.get('isolation')}")
        asyncio.run(drive(daemon, cfg, state, log))
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: stopping the daemon")
    except Exception as e:  # noqa: BLE001 - the report says what failed; the daemon is still stopped
        error = f"{type(e).__name__}: {e}"
        log(f"error: {error}")
    finally:
        tag = daemon.state_tag
        # Every instance process seen during the run must be gone too, not only the last list.
        daemon.stop(also_check=state.seen)
    result = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "config": {
            "clients": cfg.clients,
            "duration_s": cfg.duration_s,
            "kill_interval_s": cfg.kill_interval_s,
            "request_timeout_s": cfg.request_timeout_s,
            "max_requests": cfg.max_requests,
            "seed": cfg.seed,
            "daemon_flags": " ".join(cfg.daemon_args) or "defaults",
            "daemon_launch": "--listen 127.0.0.1:<free port>, --state-dir <temp dir>, --auth, --runtimes-dir",
            "actions": [
                {
                    "name": a.name,
                    "kind": a.kind,
                    "source": a.source,
                    "weight": a.weight,
                    "params": a.params,
                    "sharing": a.sharing,
                    "concurrency": a.concurrency,
                }
                for a in SOAK_ACTIONS
            ],
        },
        "daemon": {
            "isolation": daemon.health.get("isolation"),
            "cgroup": daemon.health.get("cgroup"),
            "died_during_run": state.daemon_died,
        },
        "phase_reached": state.phase,
        "interrupted": interrupted,
        "error": error,
        "load_seconds": round(state.load_seconds, 3),
        **state.tally.summary(state.load_seconds),
        "kills": state.kills.as_dict(),
        "daemon_rss_bytes": state.rss.as_dict(),
        "daemon_fds": state.fds.as_dict(),
        "instances_after_load": state.instances_after,
        "daemon_counters": state.counters,
        "after_stop": {
            "stop_seconds": round(daemon.stop_seconds, 3) if daemon.stop_seconds is not None else None,
            "instance_processes_seen": len(state.seen),
            "instance_processes_checked": daemon.checked_processes,
            "leaked_pids": daemon.leaked_pids,
            "leftover_processes": [p.__dict__ for p in daemon.leftovers.processes],
            "cgroup_tag": tag,
            "cgroup_dirs_seen_during_run": state.cgroup_seen,
            "cgroup_dirs_left": daemon.leftovers.cgroups,
        },
    }
    return result, interrupted


def passed(result: dict) -> bool:
    """No daemon failure, the daemon survived, and nothing was left behind."""
    after = result["after_stop"]
    return (
        not result["error"]
        and not result["interrupted"]
        and not result["daemon"]["died_during_run"]
        and result["by_category"]["daemon failure"] == 0
        and not after["leaked_pids"]
        and not after["leftover_processes"]
        and not after["cgroup_dirs_left"]
    )
