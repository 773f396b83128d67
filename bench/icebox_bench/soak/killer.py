"""The fault half of the soak: now and then, SIGKILL one process of one instance.

Victims come only from the daemon's own list (GET /icebox/v1/instances `pids`), and a pid is
killed only if it is still the process that was listed (same start time) and belongs to this
daemon (in its `icebox-<tag>` cgroups, or a descendant of the daemon when it runs instances
unisolated): pid reuse or a stale list can never make the soak kill anything else.
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass

from .. import leaks, procfs


@dataclass(frozen=True)
class Victim:
    instance: str
    state: str
    pid: int


def choose_victim(views: list[dict], rng: random.Random) -> Victim | None:
    """A random process of a random instance that has processes."""
    candidates = [v for v in views if v.get("pids")]
    if not candidates:
        return None
    view = rng.choice(candidates)
    return Victim(str(view.get("id", "?")), str(view.get("state", "?")), int(rng.choice(view["pids"])))


def belongs_to_daemon(pid: int, daemon_pid: int, tag: str) -> bool:
    return leaks.in_daemon_cgroup(pid, tag) or procfs.descends_from(pid, daemon_pid)


def kill(victim: Victim, listed_start: int | None, daemon_pid: int, tag: str) -> str | None:
    """SIGKILL the victim; None if done, else why not (the reason is counted, not an error)."""
    if listed_start is None or procfs.start_time(victim.pid) != listed_start:
        return "gone before the kill"
    if not belongs_to_daemon(victim.pid, daemon_pid, tag):
        return "not the daemon's process"
    try:
        os.kill(victim.pid, signal.SIGKILL)
    except ProcessLookupError:
        return "gone before the kill"
    return None
