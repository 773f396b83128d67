"""The benchmark functions, read from functions/<lang>/functions.json.

Each manifest is a JSON list of objects:
  {"name", "language", "kind", "path", "main", "memory_mb", "timeout_ms",
   "inputs": {"A": {...}, "B": {...}}, "paper", "description"}
`path` is relative to the functions/ directory: a source file (deployed as text), a directory
(zipped) or a .jar/.zip (deployed as is); zips and jars go as base64 with binary=true.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import paths

LANGUAGES = ("python", "nodejs", "java")
_REQUIRED = ("name", "language", "kind", "path")


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    language: str
    kind: str
    path: Path
    main: str | None = None
    memory_mb: int | None = None
    timeout_ms: int | None = None
    inputs: dict = field(default_factory=dict)
    paper: str = ""
    description: str = ""

    def input(self, size: str) -> dict:
        """The parameters of input size `size` (A or B); {} when the function takes none."""
        if not self.inputs:
            return {}
        if size not in self.inputs:
            raise ManifestError(f"function {self.name} has no input {size!r} (it has {', '.join(sorted(self.inputs))})")
        value = self.inputs[size]
        if not isinstance(value, dict):
            raise ManifestError(f"function {self.name}: input {size} is not a JSON object")
        return value


def _parse_entry(entry: object, manifest: Path, root: Path) -> FunctionSpec:
    if not isinstance(entry, dict):
        raise ManifestError(f"{manifest}: every entry must be an object, got {entry!r:.60}")
    missing = [k for k in _REQUIRED if not entry.get(k)]
    if missing:
        raise ManifestError(f"{manifest}: entry {entry.get('name', '?')!r} lacks {', '.join(missing)}")
    for key in ("memory_mb", "timeout_ms"):
        if entry.get(key) is not None and not isinstance(entry[key], int):
            raise ManifestError(f"{manifest}: {entry['name']}.{key} must be an integer")
    inputs = entry.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise ManifestError(f"{manifest}: {entry['name']}.inputs must be an object")
    return FunctionSpec(
        name=entry["name"],
        language=entry["language"],
        kind=entry["kind"],
        path=(root / entry["path"]).resolve(),
        main=entry.get("main") or None,
        memory_mb=entry.get("memory_mb"),
        timeout_ms=entry.get("timeout_ms"),
        inputs=inputs,
        paper=entry.get("paper", ""),
        description=entry.get("description", ""),
    )


def load_all(root: Path | None = None) -> list[FunctionSpec]:
    """Every function of every functions/<lang>/functions.json, in directory then file order."""
    root = Path(root) if root else paths.functions_dir()
    manifests = sorted(root.glob("*/functions.json"))
    if not manifests:
        raise ManifestError(f"no function manifests under {root} (expected {root}/<lang>/functions.json)")
    specs: list[FunctionSpec] = []
    seen: dict[str, Path] = {}
    for manifest in manifests:
        try:
            entries = json.loads(manifest.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ManifestError(f"cannot read {manifest}: {e}") from None
        if not isinstance(entries, list):
            raise ManifestError(f"{manifest}: expected a JSON list of functions")
        for entry in entries:
            spec = _parse_entry(entry, manifest, root)
            if spec.name in seen:
                raise ManifestError(f"function {spec.name} is in both {seen[spec.name]} and {manifest}")
            seen[spec.name] = manifest
            specs.append(spec)
    return specs


def select(selector: str, specs: list[FunctionSpec]) -> list[FunctionSpec]:
    """`all`, a language (python, nodejs, java), or a comma list of names and languages."""
    by_name = {s.name: s for s in specs}
    chosen: dict[str, FunctionSpec] = {}
    for token in (t.strip() for t in selector.split(",")):
        if not token:
            continue
        if token == "all":
            chosen.update((s.name, s) for s in specs)
        elif token in by_name:
            chosen[token] = by_name[token]
        elif any(s.language == token for s in specs) or token in LANGUAGES:
            group = [s for s in specs if s.language == token]
            if not group:
                raise ManifestError(f"no {token} functions in the manifests yet")
            chosen.update((s.name, s) for s in group)
        else:
            known = ", ".join(sorted(by_name))
            raise ManifestError(f"unknown function or set {token!r}; known: all, {', '.join(LANGUAGES)}, {known}")
    if not chosen:
        raise ManifestError(f"{selector!r} selects no function")
    return list(chosen.values())
