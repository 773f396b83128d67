"""The host page cache around one action's snapshot files: dropped before a cold run
(posix_fadvise DONTNEED on the files under the daemon's `<state>/snapshots/`, never the whole
machine's cache), filled for the "cached" reference, and measured (fincore) so a run says what
state the cache really was in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

READ = 1 << 20


def snapshot_dirs(state_dir: Path) -> dict[str, Path]:
    """`namespace/name` → the directory of that action's snapshot files (the daemon's store:
    `<state>/snapshots/<action key>/<isolation>-<version>/{entry.json,image/}`)."""
    found: dict[str, Path] = {}
    root = Path(state_dir) / "snapshots"
    for entry in root.glob("*/*/entry.json"):
        if entry.parent.name.startswith("."):
            continue  # a snapshot being built
        try:
            action = json.loads(entry.read_text())["action"]
        except (OSError, ValueError, KeyError):
            continue
        found[action] = entry.parent / "image"
    return found


def files(image_dir: Path) -> list[Path]:
    return sorted(p for p in Path(image_dir).iterdir() if p.is_file())


def drop(paths: list[Path]) -> None:
    """Clean pages leave the cache; pages a live process maps stay (evict its instance first)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fill(paths: list[Path]) -> None:
    """Reads every byte (holes too: a restored guest touching one faults it in from the cache)."""
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.read(READ):
                pass


def resident_bytes(paths: list[Path]) -> int | None:
    """Bytes of these files in the page cache (util-linux fincore), or None without it."""
    tool = shutil.which("fincore")
    if tool is None or not paths:
        return None
    out = subprocess.run(
        [tool, "--bytes", "--noheadings", "--raw", "--output", "RES", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return None
    return sum(int(line) for line in out.stdout.split() if line.isdigit())
