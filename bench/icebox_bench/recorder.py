"""A run's output directory, written as the run goes so an aborted run keeps its data.

Layout (docs/bench.md):
  config.json        what was asked for (written first)
  invocations.jsonl  one line per scheduled invocation
  memory.jsonl       one line per sample of /icebox/v1/instances and /icebox/v1/memory
  events.jsonl       the lifecycle events of the run, as the daemon sent them
  result.json        what happened (written last, also after an abort)
Every JSONL line is flushed when written: a killed run loses at most the line being written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def _json_default(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_json(path: Path, data) -> None:
    """Write via a temporary file and rename, so a reader never sees half a document."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=_json_default) + "\n")
    os.replace(tmp, path)


class JsonlWriter:
    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "a", buffering=1)  # line-buffered: every line reaches the OS
        self.lines = 0

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, separators=(",", ":"), default=_json_default) + "\n")
        self.lines += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


class RunDir:
    """The output directory of one run. Refuses to mix runs: the directory must be new or empty."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if self.path.exists() and any(self.path.iterdir()):
            raise FileExistsError(f"output directory {self.path} is not empty: choose a new one")
        self.path.mkdir(parents=True, exist_ok=True)
        self._writers: dict[str, JsonlWriter] = {}

    def file(self, name: str) -> Path:
        return self.path / name

    def jsonl(self, name: str) -> JsonlWriter:
        if name not in self._writers:
            self._writers[name] = JsonlWriter(self.path / name)
        return self._writers[name]

    def write_json(self, name: str, data) -> None:
        write_json(self.path / name, data)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()


def read_jsonl(path: Path) -> list[dict]:
    """All complete lines; a torn last line (the run was killed mid-write) is ignored."""
    records = []
    if not path.exists():
        return records
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records
