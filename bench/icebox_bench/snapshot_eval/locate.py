"""Where an action's snapshot lives: `<state-dir>/snapshots/<action>/<isolation>-<version>/`
holds `entry.json` (which action and version) and `image/` (docs/snapshots.md). A restored
instance's `restore_stats.snapshot` (GET /icebox/v1/instances/{id}) names the image directory
it was restored from; a daemon that does not say it is searched under `--state-dir` for the
entry of the action's version. Either way the files must be on this machine."""

from __future__ import annotations

import json
from pathlib import Path


class LocateError(RuntimeError):
    pass


def _entry(directory: Path) -> dict | None:
    try:
        return json.loads((directory / "entry.json").read_text())
    except (OSError, ValueError):
        return None


def from_restore_stats(stats: dict | None, action: str, version: str) -> Path | None:
    """The snapshot directory a restored instance names (the parent of its image directory),
    if its entry is of `action` in `version`."""
    image = (stats or {}).get("snapshot")
    if not isinstance(image, str) or not image:
        return None
    directory = Path(image).parent
    entry = _entry(directory)
    if entry is None:
        raise LocateError(
            f"{action}: the restore names {image}, which is not a snapshot on this machine "
            "(the recipe must run where the daemon runs)"
        )
    if entry.get("action") != action or entry.get("version") != version:
        raise LocateError(
            f"{action}: the restore names {directory}, the snapshot of {entry.get('action')} "
            f"version {entry.get('version')}, not version {version}"
        )
    return directory


def under_state_dir(state: Path, action: str, version: str) -> Path:
    """The snapshot directory of `action` (`namespace/name`, as GET /icebox/v1/snapshots names
    it) in `version`, searched under the daemon's state directory."""
    root = Path(state) / "snapshots"
    for entry_file in sorted(root.glob("*/*/entry.json")):
        if entry_file.parent.name.startswith("."):
            continue  # a snapshot being built
        entry = _entry(entry_file.parent)
        if entry and entry.get("action") == action and entry.get("version") == version:
            return entry_file.parent
    raise LocateError(f"no snapshot directory of {action} version {version} under {root}")


def snapshot_dir(stats: dict | None, action: str, version: str, state: str | Path | None) -> Path:
    """From the restore's account, else under `state` (--state-dir), else an error saying so."""
    found = from_restore_stats(stats, action, version)
    if found is not None:
        return found
    if state:
        return under_state_dir(Path(state), action, version)
    raise LocateError(
        f"{action}: the daemon does not name the snapshot a restore used (restore_stats.snapshot): pass --state-dir"
    )
