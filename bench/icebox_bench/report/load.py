"""Read a run directory back (see recorder.py for the layout)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..recorder import read_jsonl


@dataclass
class RunData:
    path: Path
    label: str
    config: dict = field(default_factory=dict)
    result: dict = field(default_factory=dict)
    invocations: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def load_run(path: Path, label: str | None = None) -> RunData:
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"run directory not found: {path}")
    if not (path / "invocations.jsonl").exists() and not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} is not a run directory (no config.json or invocations.jsonl)")
    config = _read_json(path / "config.json")
    return RunData(
        path=path,
        label=label or config.get("label") or path.name,
        config=config,
        result=_read_json(path / "result.json"),
        invocations=read_jsonl(path / "invocations.jsonl"),
        memory=read_jsonl(path / "memory.jsonl"),
        events=read_jsonl(path / "events.jsonl"),
    )
