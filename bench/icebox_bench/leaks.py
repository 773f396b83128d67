"""What a stopped iceboxd left behind: processes tied to its state directory and its cgroups
(`icebox-<tag>`). The same rules as the integration harness (tests/integration/src/leaks.rs),
so a benchmark's "nothing leaked" means what the tests mean by it.

Standard library only: bench/node imports it with the system python3.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def state_tag(state_dir: str) -> str:
    """The daemon's name for its cgroups: FNV-1a 64 of the canonical state dir path, low 32
    bits in hex (crates/iceboxd/src/server.rs `state_tag`)."""
    h = 0xCBF29CE484222325
    for b in os.fsencode(os.path.realpath(state_dir)):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h & 0xFFFFFFFF:08x}"


@dataclass
class LeftProcess:
    pid: int
    tie: str
    cmdline: str


@dataclass
class Leftovers:
    processes: list[LeftProcess] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.cgroups)

    def describe(self) -> str:
        lines = [f"process {p.pid} ({p.tie}): {p.cmdline}" for p in self.processes]
        return "; ".join(lines + [f"cgroup {c}" for c in self.cgroups])


def cgroup_dirs(tag: str, root: Path = CGROUP_ROOT) -> list[str]:
    """The daemon's parent cgroup in every hierarchy: `<root>/icebox-<tag>` (v2) and
    `<root>/<controller>/icebox-<tag>` (v1, hybrid)."""
    name = f"icebox-{tag}"
    found = [root / name] if (root / name).is_dir() else []
    try:
        found += [e / name for e in root.iterdir() if (e / name).is_dir()]
    except OSError:
        pass
    return sorted(str(p) for p in found)


def mentions_path(block: bytes, path: bytes) -> bool:
    """`path` as a whole path or a path prefix inside a NUL-separated block (`/a/b` matches
    `/a/b`, `/a/b/c`, `X=/a/b`, not `/a/bc`)."""
    if not path:
        return False
    start = block.find(path)
    while start != -1:
        end = start + len(path)
        if end == len(block) or block[end] in b"/\0":
            return True
        start = block.find(path, start + 1)
    return False


def names_cgroup(line: str, marker: str) -> bool:
    """A `/proc/PID/cgroup` line whose path is `marker` or below it."""
    parts = line.split(":", 2)
    path = parts[2] if len(parts) == 3 else ""
    return path == marker or path.startswith(marker + "/")


def in_daemon_cgroup(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return any(names_cgroup(line.strip(), f"/icebox-{tag}") for line in f)
    except OSError:
        return False


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    close = stat.rfind(b")")
    return close != -1 and stat[close + 2 : close + 3] not in (b"Z", b"")


def processes_of(state_dir: str, tag: str) -> list[LeftProcess]:
    """Live processes whose command line or environment names the state directory (the daemon,
    crun, an unisolated runtime), or that sit in one of its cgroups (sandboxed runtimes)."""
    me = os.getpid()
    path = os.fsencode(os.path.realpath(state_dir))
    marker = f"/icebox-{tag}"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me or not _alive(int(name)):
            continue
        pid = int(name)
        cmdline = _read(f"/proc/{pid}/cmdline")
        if mentions_path(cmdline, path):
            tie = "command line names the state dir"
        elif mentions_path(_read(f"/proc/{pid}/environ"), path):
            tie = "environment names the state dir"
        elif any(
            names_cgroup(line, marker) for line in _read(f"/proc/{pid}/cgroup").decode(errors="replace").splitlines()
        ):
            tie = "in the daemon's cgroup"
        else:
            continue
        found.append(LeftProcess(pid, tie, cmdline.replace(b"\0", b" ").decode(errors="replace").strip()))
    return found


def leftovers(state_dir: str, tag: str) -> Leftovers:
    return Leftovers(processes_of(state_dir, tag), cgroup_dirs(tag))


def wait_for_no_leftovers(state_dir: str, tag: str, within_s: float) -> Leftovers:
    """Polls until nothing is left or `within_s` passes; returns what is left at the end."""
    deadline = time.monotonic() + within_s
    while True:
        left = leftovers(state_dir, tag)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def remove(left: Leftovers) -> None:
    """Kill what a daemon of ours left and remove its cgroups, so one failed run does not leave
    frozen processes on the machine. Only for leftovers of a state dir this process created."""
    for p in left.processes:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for top in left.cgroups:
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            # A frozen task cannot die: thaw first (v1 freezer, v2 cgroup.freeze).
            for knob, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                try:
                    Path(dirpath, knob).write_text(value)
                except OSError:
                    pass
            _kill_members(dirpath)
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def _kill_members(cgroup: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pids = [int(x) for x in _read(os.path.join(cgroup, "cgroup.procs")).split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
