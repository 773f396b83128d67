"""CPU time of a daemon and all its instances, for Fig. 9c (the paper used `sar`).

**cpuacct** (cgroup v1, root): the harness makes its own cpuacct cgroup and starts iceboxd in
it. iceboxd moves instances into its own memory / freezer / cpu / pids cgroups but not into
cpuacct ones, so every process it starts stays in the harness's group: `cpuacct.usage` is the
CPU time of the daemon and of every instance it ran, including instances evicted meanwhile
(the kernel charges a cgroup's ancestors as it goes, so nothing leaves with an exiting
process). Nothing else on the machine is counted, the harness itself included.

**proc** (fallback: no writable cpuacct hierarchy of its own, e.g. a cgroup2-only host or
`cpu,cpuacct` co-mounted): /proc/<pid>/stat
of the daemon (its threads, and the children it has reaped) plus the live instances'
processes at each sample. An instance's CPU is then lost if it is evicted between two samples
and was not the daemon's own child; the method is recorded with every reading.

The daemon's own share is always /proc/<daemon pid>/stat (utime + stime of all its threads);
instances = total − daemon. The whole machine's busy time (/proc/stat) is sampled too: what
other work did meanwhile (`other_cores`) says how far a run's latencies can be trusted on a
shared machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from bisect import bisect_left
from pathlib import Path

from ..client import IceboxClient, IceboxError
from ..daemon import Daemon
from ..recorder import JsonlWriter

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpuacct_mount(mountinfo: str | None = None) -> Path | None:
    """The cgroup v1 hierarchy holding the cpuacct controller, from /proc/self/mountinfo; None
    when there is none, or when it is co-mounted with cpu (`cpu,cpuacct`): iceboxd moves its
    instances into cgroups of the cpu hierarchy, which would take them out of the group."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        options = tail[2].split(",")
        if tail[0] == "cgroup" and "cpuacct" in options:
            return None if "cpu" in options else Path(fields[4].replace("\\040", " "))
    return None


def proc_stat_seconds(text: str) -> tuple[float, float]:
    """(own utime + stime, reaped children's cutime + cstime) in seconds, from /proc/PID/stat.
    The command name (field 2) may hold spaces and parentheses: fields are counted after the
    last ')'."""
    fields = text[text.rindex(")") + 2 :].split()
    # After the name: state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime) / _CLK_TCK, (cutime + cstime) / _CLK_TCK


def machine_busy_seconds(stat_text: str) -> float:
    """CPU time all CPUs spent busy since boot, from /proc/stat's first line: everything but
    idle and iowait (guest time is already inside user)."""
    fields = stat_text.splitlines()[0].split()
    if fields[0] != "cpu":
        raise ValueError("/proc/stat does not start with the cpu line")
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return (sum(values) - values[3] - values[4]) / _CLK_TCK


def process_seconds(pid: int) -> tuple[float, float] | None:
    try:
        return proc_stat_seconds(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


class CpuacctGroup:
    """A cpuacct cgroup of the harness's own; `wrap` makes a command start inside it."""

    def __init__(self, mount: Path):
        # Not "icebox-…": that is how iceboxd names its cgroups, which cleanup tools sweep.
        self.path = mount / f"bench-cpuacct-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.path.mkdir()

    @classmethod
    def create(cls) -> CpuacctGroup | None:
        mount = cpuacct_mount()
        if mount is None or not os.access(mount, os.W_OK):
            return None
        try:
            return cls(mount)
        except OSError:
            return None

    def wrap(self, argv: list[str]) -> list[str]:
        # The shell joins the group, then execs the command: same pid, and every process the
        # command starts inherits the group.
        return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *argv]

    def usage_s(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self, timeout_s: float = 10.0) -> bool:
        """rmdir once its processes are gone (they exit shortly after the daemon)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)


class MeteredDaemon(Daemon):
    """An iceboxd started inside a CpuacctGroup when there is one."""

    def __init__(self, args: list[str], *, log_path: Path, group: CpuacctGroup | None):
        super().__init__(args, log_path=log_path)
        self.group = group

    def argv(self, listen: str) -> list[str]:
        argv = super().argv(listen)
        return self.group.wrap(argv) if self.group else argv

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


@contextlib.asynccontextmanager
async def metered_daemon(args: list[str], *, log_path: Path, log=print):
    """A MeteredDaemon started (in a cpuacct group of its own when there can be one) for the
    duration of the block; stopped, and its group removed, however the block ends."""
    group = CpuacctGroup.create()
    if group is None:
        log("note: no separate cpuacct cgroup hierarchy here: CPU is read from /proc (see cpu.py)")
    daemon = MeteredDaemon(args, log_path=log_path, group=group)
    try:
        await asyncio.to_thread(daemon.start)
        yield daemon
    finally:
        await asyncio.to_thread(daemon.stop)
        if group is not None and not group.remove():
            log(f"warning: could not remove {group.path} (processes left in it)")


async def save_metrics(client: IceboxClient, path: Path) -> None:
    """The daemon's /metrics as it is now, into `path` (nothing when it does not answer 200)."""
    reply = await client.request("GET", "/metrics")
    if reply.status == 200:
        path.write_text(str(reply.body))


class CpuSampler:
    """Samples the CPU counters every `period_s` into cpu.jsonl:
    {t_ms, method, total_s, daemon_s, machine_s}."""

    def __init__(self, client: IceboxClient, daemon: MeteredDaemon, writer: JsonlWriter, period_s: float = 1.0):
        self.client = client
        self.daemon = daemon
        self.writer = writer
        self.period_s = period_s
        self.method = "cpuacct" if daemon.group else "proc"
        self.samples: list[dict] = []
        self._task: asyncio.Task | None = None

    async def sample_once(self) -> dict | None:
        """One sample, or None when a counter cannot be read (the daemon has exited)."""
        own = process_seconds(self.daemon.pid) if self.daemon.pid else None
        if own is None:
            return None
        try:
            if self.daemon.group:
                total = self.daemon.group.usage_s()
            else:
                pids = [p for view in await self.client.instances() for p in view.get("pids") or []]
                total = own[0] + own[1] + sum(sum(s) for s in (process_seconds(p) for p in pids) if s)
            machine = machine_busy_seconds(Path("/proc/stat").read_text())
        except (OSError, ValueError, IceboxError):
            return None
        record = {
            "t_ms": round(time.time() * 1000.0, 3),
            "method": self.method,
            "total_s": round(total, 6),
            "daemon_s": round(own[0], 6),
            "machine_s": round(machine, 3),
        }
        self.samples.append(record)
        self.writer.write(record)
        return record

    async def _run(self) -> None:
        while True:
            await self.sample_once()
            await asyncio.sleep(self.period_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="cpu-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.sample_once()


def value_at(samples: list[dict], key: str, t_ms: float) -> float | None:
    """A counter at time t_ms, linearly interpolated between the samples around it (clamped to
    the first / last sample outside them). None without samples."""
    if not samples:
        return None
    times = [s["t_ms"] for s in samples]
    i = bisect_left(times, t_ms)
    if i == 0:
        return samples[0][key]
    if i == len(samples):
        return samples[-1][key]
    a, b = samples[i - 1], samples[i]
    if b["t_ms"] == a["t_ms"]:
        return b[key]
    frac = (t_ms - a["t_ms"]) / (b["t_ms"] - a["t_ms"])
    return a[key] + (b[key] - a[key]) * frac


def window_cpu(samples: list[dict], start_ms: float, end_ms: float) -> dict | None:
    """CPU seconds used in [start_ms, end_ms]: total (daemon + instances), daemon, instances;
    `cores` = total / window length; `other_cores` = what the rest of the machine kept busy
    meanwhile (None without machine samples)."""
    if not samples or end_ms <= start_ms:
        return None

    def used(key: str) -> float:
        return value_at(samples, key, end_ms) - value_at(samples, key, start_ms)

    total, daemon = used("total_s"), used("daemon_s")
    window_s = (end_ms - start_ms) / 1000.0
    other = (used("machine_s") - total) / window_s if all("machine_s" in s for s in samples) else None
    return {
        "method": samples[-1].get("method"),
        "total_s": round(total, 3),
        "daemon_s": round(daemon, 3),
        "instances_s": round(total - daemon, 3),
        "cores": round(total / window_s, 4),
        "other_cores": None if other is None else round(max(0.0, other), 4),
    }
