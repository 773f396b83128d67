"""Process facts from /proc: memory, CPU time, open files, and identity checks that survive pid
reuse. Standard library only: bench/node imports it with the system python3."""

from __future__ import annotations

import os

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/{pid}/status")


def rss_bytes(pid: int) -> int:
    """VmRSS of one process."""
    return _status_kib(pid, "VmRSS") * 1024


def fd_count(pid: int) -> int:
    """Open file descriptors of one process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def uss_bytes(pid: int) -> int:
    """Private_Clean + Private_Dirty from smaps_rollup (what the process alone holds)."""
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1]) * 1024
    return total


def stat_fields(stat: str) -> list[str]:
    """The fields of /proc/PID/stat after the command (which may hold spaces and parentheses):
    state is index 0, ppid 1, utime 11, stime 12, start time 19."""
    return stat.rsplit(")", 1)[1].split()


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return stat_fields(f.read())
    except (FileNotFoundError, ProcessLookupError):
        return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far."""
    fields = _stat(pid)
    if fields is None:
        raise ProcessLookupError(pid)
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def threads_by_name(pid: int) -> dict[str, tuple[float, int]]:
    """CPU seconds and voluntary context switches (the times a thread waited for something)
    of a process's threads so far, summed per thread name (tokio-rt-worker, ...)."""
    out: dict[str, tuple[float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/comm") as f:
                name = f.read().strip()
            with open(f"{base}/stat") as f:
                fields = stat_fields(f.read())
            with open(f"{base}/status") as f:
                switches = next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches:"))
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue  # a thread that ended meanwhile
        cpu, waits = out.get(name, (0.0, 0))
        out[name] = (cpu + (int(fields[11]) + int(fields[12])) / _CLK_TCK, waits + switches)
    return out


def start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot, or None if the process is gone."""
    fields = _stat(pid)
    if fields is None or fields[0] == "Z":
        return None
    return int(fields[19])


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is among the parents of `pid` (walking ppid up to init)."""
    for _ in range(64):
        fields = _stat(pid)
        if fields is None:
            return False
        pid = int(fields[1])
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def identity(pid: int) -> tuple[int, int] | None:
    """(pid, start time): still the same process later only if both match."""
    started = start_time(pid)
    return None if started is None else (pid, started)


def still_running(ident: tuple[int, int]) -> bool:
    return start_time(ident[0]) == ident[1]


def mounts_under(path: str) -> list[str]:
    """Mount points at or below `path` in this mount namespace."""
    prefix = os.path.realpath(path).rstrip("/") + "/"
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if (point + "/").startswith(prefix):
                found.append(point)
    return found
