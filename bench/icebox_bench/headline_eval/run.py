"""One mode of the headline run, live: a fresh iceboxd with the mode's flags, the actions
deployed, the workload replayed open loop (openloop.py) while the instances, the node's memory
view and the offload tiers are sampled every second; then the daemon's CPU is read and it is
stopped (daemon.py checks nothing of it is left), and swap and zswap are checked to be as they
were found."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .. import procfs
from ..client import IceboxClient, IceboxError
from ..daemon import Daemon
from ..deploy import action_body, put_body
from ..manifest import FunctionSpec
from ..openloop import OpenLoop
from ..recorder import JsonlWriter, read_jsonl, write_json
from ..sampler import sample_record
from ..schedule import Timeline, build
from . import host
from .modes import Mode
from .workload import Workload


@dataclass
class Replay:
    workload: Workload
    specs: dict[str, FunctionSpec]
    size: str
    tail_s: float
    zram: str
    swapfile: str
    drain_timeout_s: float = 60.0
    period_s: float = 1.0
    nice: int = 0
    # The CPU weight of the daemon's instances, in nice-0 tasks (0: the cgroup's default).
    cpu_tasks: int = 0


class NicedDaemon(Daemon):
    """A daemon run at a nice level (its instances inherit it): on a machine shared with
    builds, a negative level keeps the measured node from queueing behind them."""

    def __init__(self, args: list[str], nice: int, **kw):
        super().__init__(args, **kw)
        self.nice = nice

    def argv(self, listen: str) -> list[str]:
        inner = super().argv(listen)
        # `nice` execs the daemon: the pid is the daemon's.
        return ["nice", "-n", str(self.nice), *inner] if self.nice else inner


class HostStateChanged(RuntimeError):
    """Swap or zswap is not as the run found it."""


async def _sampler(
    client,
    tag: str,
    cpu_tasks: int,
    t0: float,
    out: JsonlWriter,
    samples: list,
    swap_file: str | None,
    stop: asyncio.Event,
    period_s: float,
) -> None:
    while not stop.is_set():
        if cpu_tasks:
            # The daemon creates its cgroup with its first instance: set it as soon as it is there.
            host.raise_cpu_weight(tag, cpu_tasks)
        try:
            instances, memory = await asyncio.gather(client.instances(), client.memory())
            now = time.time()
            record = sample_record(now * 1000.0, instances, memory)
            pool = memory.get("pool") or {}
            device = pool.get("device") if str(pool.get("device") or "").startswith("/dev/zram") else None
            record["t_s"] = round(now - t0, 3)
            record["swaps"] = host.tiers(host.read("/proc/swaps"), device, swap_file)
            out.write(record)
            samples.append(record)
        except IceboxError:
            pass
        try:
            await asyncio.wait_for(stop.wait(), period_s)
        except TimeoutError:
            pass


def _bodies(replay: Replay, mode: Mode) -> dict[str, dict]:
    """The body of every action (one code read per benchmark function)."""
    base: dict[str, dict] = {}
    out = {}
    for action, bench in sorted(set(replay.workload.actions.values())):
        spec = replay.specs[bench]
        if bench not in base:
            base[bench] = action_body(spec)
        body = {**base[bench], "limits": dict(base[bench].get("limits") or {})}
        extra = mode.annotations.get(spec.language) or []
        if extra:
            body["annotations"] = list(extra)
        out[action] = body
    return out


async def run_mode(mode: Mode, replay: Replay, out_dir: Path, *, log=print) -> dict:
    """{"records", "samples", "daemon_cpu_s", "busy_share", "horizon_s", "lag_ms", "pool"}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    zswap_before = host.read(host.ZSWAP_ENABLED).strip()
    daemon = NicedDaemon(mode.args, replay.nice, log_path=out_dir / "iceboxd.log", label=f"iceboxd ({mode.name})")
    swap_file = None
    if mode.offload_pool:
        # The file lives in the daemon's own temp dir, on disk, removed with it.
        swap_file = str(Path(daemon.dir) / "offload.swap")
        daemon.args += ["--offload-pool", f"zram:{replay.zram}+swapfile:{swap_file}:{replay.swapfile}"]
    write_json(out_dir / "daemon_args.json", daemon.args)
    w = replay.workload
    result: dict = {}
    pool_names: set[str] = set()
    with daemon:
        async with IceboxClient(daemon.apihost, daemon.auth) as client:
            for action, body in _bodies(replay, mode).items():
                await put_body(client, action, body, action)
            sched = build(
                w.invocations, {t: a for t, (a, _) in w.actions.items()}, Timeline(origin_s=w.origin_s, scale=w.speed)
            )
            writer = JsonlWriter(out_dir / "invocations.jsonl")
            memory_out = JsonlWriter(out_dir / "memory.jsonl")
            driver = OpenLoop(
                client,
                sched,
                writer,
                params={a: replay.specs[b].input(replay.size) for a, b in w.actions.values()},
                action_timeouts_ms={
                    a: replay.specs[b].timeout_ms for a, b in w.actions.values() if replay.specs[b].timeout_ms
                },
                drain_timeout_s=replay.drain_timeout_s,
                log=log,
            )
            t0 = time.time() + driver.start_delay_s
            samples: list[dict] = []
            stop = asyncio.Event()
            cpu0, busy0 = procfs.cpu_seconds(daemon.pid), host.cpu_times(host.read("/proc/stat"))
            result["loadavg_1m_start"] = os.getloadavg()[0]
            task = asyncio.create_task(
                _sampler(
                    client,
                    daemon.state_tag,
                    replay.cpu_tasks,
                    t0,
                    memory_out,
                    samples,
                    swap_file,
                    stop,
                    replay.period_s,
                )
            )
            log(
                f"{mode.name}: replaying {len(sched.items)} invocations of {len(set(w.actions.values()))} "
                f"actions over {sched.length_s():.0f} s"
            )
            try:
                ol = await driver.run()
                remaining = sched.length_s() + replay.tail_s - (time.time() - t0)
                if remaining > 0:
                    await asyncio.sleep(remaining)
            finally:
                stop.set()
                await task
                writer.close()
                memory_out.close()
            result["daemon_cpu_s"] = round(procfs.cpu_seconds(daemon.pid) - cpu0, 3)
            result["busy_share"] = host.busy_share(busy0, host.cpu_times(host.read("/proc/stat")))
            # The machine is shared: its load during the replay, other work included.
            result["loadavg_1m_end"] = os.getloadavg()[0]
            # The files' names only (cpu.shares: cgroup v1, cpu.weight: v2): the paths are this machine's.
            result["cpu_weight_files"] = [
                Path(f).name
                for f in (host.raise_cpu_weight(daemon.state_tag, replay.cpu_tasks) if replay.cpu_tasks else [])
            ]
            memory = await client.memory()
            result["pool"] = memory.get("pool")
            device = (memory.get("pool") or {}).get("device")
            pool_names = {n for n in (device, swap_file) if n}
            result["lag_ms"] = ol.lag_ms
            result["aborted"] = ol.aborted
    result["records"] = read_jsonl(out_dir / "invocations.jsonl")
    result["samples"] = samples
    result["horizon_s"] = round(sched.length_s() + replay.tail_s, 3)
    left = host.ours_left(host.read("/proc/swaps"), pool_names)
    zswap_after = host.read(host.ZSWAP_ENABLED).strip()
    if left or zswap_after != zswap_before:
        raise HostStateChanged(
            f"{mode.name}: after the daemon stopped, swap still on: {left or 'none'}; zswap "
            f"{zswap_before!r} -> {zswap_after!r}"
        )
    return result
