"""Where an action's snapshot lives: `<state-dir>/snapshots/<action>/<isolation>-<version>/`
holds `entry.json` (which action and version) and `image/` (docs/snapshots.md). The node API
does not name the directory, so the recipe finds it from the daemon's state directory: the
`--state-dir` of the iceboxd this process started (`icebox-bench run` without --apihost), or
the one given with --state-dir (a daemon on this machine)."""

from __future__ import annotations

import json
import os
from pathlib import Path


class LocateError(RuntimeError):
    pass


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in an argument vector (`--flag VALUE` or `--flag=VALUE`)."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    return None


def _children(parent: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            kids.append(int(entry))
    return kids


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def state_dir(explicit: str | Path | None = None) -> Path:
    """The daemon's state directory: `explicit`, else that of the one iceboxd child process of
    this process."""
    if explicit:
        path = Path(explicit)
        if not path.is_dir():
            raise LocateError(f"--state-dir {path} is not a directory")
        return path
    found = []
    for pid in _children(os.getpid()):
        argv = _argv(pid)
        if argv and Path(argv[0]).name == "iceboxd":
            value = flag_value(argv, "--state-dir")
            if value:
                found.append(Path(value))
    if len(found) != 1:
        raise LocateError(f"cannot tell the daemon's state directory ({len(found)} iceboxd child processes with "
                          "--state-dir): pass --state-dir (the snapshot files must be on this machine)")
    return found[0]


def snapshot_dir(state: Path, action: str, version: str) -> Path:
    """The snapshot directory of `action` (`namespace/name`, as GET /icebox/v1/snapshots names
    it) in `version`."""
    root = state / "snapshots"
    for entry in sorted(root.glob("*/*/entry.json")):
        if entry.parent.name.startswith("."):
            continue  # a snapshot being built
        try:
            stored = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if stored.get("action") == action and stored.get("version") == version:
            return entry.parent
    raise LocateError(f"no snapshot directory of {action} version {version} under {root}")
