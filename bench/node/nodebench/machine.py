"""Facts about the machine a report was measured on."""

from __future__ import annotations

import os
import platform
import subprocess

from .daemon import REPO


def cgroup_mode() -> str:
    """v2 (unified), v1 hybrid (cgroup2 mounted beside v1) or v1, from /proc/self/mounts."""
    mounts = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mounts.append((parts[1], parts[2]))
    if ("/sys/fs/cgroup", "cgroup2") in mounts:
        return "v2 (unified)"
    v1 = any(fs == "cgroup" for _, fs in mounts)
    v2 = [p for p, fs in mounts if fs == "cgroup2"]
    if v1 and v2:
        return f"v1 hybrid (cgroup2 without controllers at {v2[0]})"
    if v1:
        return "v1"
    return "none mounted"


def _first_line(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def _meminfo_gib() -> str:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    return "unknown"


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def git_revision() -> str:
    rev = _first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    try:
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        dirty = ""
    return rev + (" (with uncommitted changes)" if dirty else "")


def facts() -> list[list[str]]:
    return [
        ["CPUs (nproc)", str(len(os.sched_getaffinity(0)))],
        ["CPU model", _cpu_model()],
        ["Memory", _meminfo_gib()],
        ["Kernel", platform.release()],
        ["cgroup mode", cgroup_mode()],
        ["Running as root", "yes" if os.geteuid() == 0 else "no (instances run without isolation)"],
        ["Load average at start (1/5/15 min)", loadavg()],
        ["Python proxy interpreter", _first_line(["/usr/bin/python3", "--version"])],
        ["Node.js", _first_line(["node", "--version"])],
        ["Java", _first_line(["java", "-version"])],
        ["Benchmark client", f"Python {platform.python_version()} (http.client, keep-alive)"],
        ["Source revision", git_revision()],
    ]
