"""Shared fixtures: the trace samples (../shared/traces or $ICEBOX_TRACES_DIR) and small
hand-written inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from icebox_bench import paths


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    d = paths.traces_dir()
    if not (d / "azure2019-sample100" / "invocations.csv").is_file():
        pytest.fail(
            f"trace samples not found at {d}: they live in ../shared/traces next to the repository, "
            "or set ICEBOX_TRACES_DIR"
        )
    return d


@pytest.fixture
def write_lines():
    """write_lines(path, lines) -> path: a small CSV from its lines."""

    def write(path: Path, lines: list[str]) -> Path:
        path.write_text("\n".join(lines) + "\n")
        return path

    return write


@pytest.fixture
def functions_dir(tmp_path: Path) -> Path:
    """Three hello-style functions in the manifest layout (two Python, one Node.js)."""
    root = tmp_path / "functions"
    (root / "python").mkdir(parents=True)
    (root / "nodejs").mkdir()
    (root / "python" / "hello.py").write_text(
        "def main(args):\n    return {'greeting': 'hello ' + args.get('name', 'world')}\n"
    )
    (root / "python" / "square.py").write_text(
        "def main(args):\n    n = int(args.get('n', 3))\n    return {'square': n * n}\n"
    )
    (root / "nodejs" / "hello.js").write_text(
        "function main(args) {\n  return { greeting: 'hello ' + (args.name || 'world') };\n}\n"
    )
    (root / "python" / "functions.json").write_text(
        json.dumps(
            [
                {
                    "name": "t-hello-py",
                    "language": "python",
                    "kind": "python:3",
                    "path": "python/hello.py",
                    "main": "main",
                    "memory_mb": 128,
                    "timeout_ms": 10000,
                    "inputs": {"A": {"name": "a"}, "B": {"name": "b" * 100}},
                    "paper": "-",
                    "description": "test hello",
                },
                {
                    "name": "t-square-py",
                    "language": "python",
                    "kind": "python:3",
                    "path": "python/square.py",
                    "memory_mb": 128,
                    "timeout_ms": 10000,
                    "inputs": {"A": {"n": 3}, "B": {"n": 1000}},
                    "paper": "-",
                    "description": "test square",
                },
            ]
        )
    )
    (root / "nodejs" / "functions.json").write_text(
        json.dumps(
            [
                {
                    "name": "t-hello-js",
                    "language": "nodejs",
                    "kind": "nodejs:20",
                    "path": "nodejs/hello.js",
                    "memory_mb": 128,
                    "timeout_ms": 10000,
                    "inputs": {"A": {"name": "a"}, "B": {"name": "b"}},
                    "paper": "-",
                    "description": "test hello",
                },
            ]
        )
    )
    return root
