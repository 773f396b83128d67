"""Where the harness finds the repository's pieces.

The package is installed in editable mode from `bench/`, so the repository root is two levels
above this file. Every location can be overridden by an environment variable, so the harness
also works from an installed copy or against a separately built daemon.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _from_env(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser().resolve() if value else default


def bin_dir() -> Path:
    """Directory holding `iceboxd` (ICEBOX_BIN_DIR, default target/release)."""
    return _from_env("ICEBOX_BIN_DIR", REPO_ROOT / "target" / "release")


def iceboxd_binary() -> Path:
    return bin_dir() / "iceboxd"


def runtimes_dir() -> Path:
    """The runtime directories the daemon starts proxies from (ICEBOX_RUNTIMES_DIR)."""
    return _from_env("ICEBOX_RUNTIMES_DIR", REPO_ROOT / "runtimes")


def functions_dir() -> Path:
    """The benchmark functions with their manifests (ICEBOX_FUNCTIONS_DIR)."""
    return _from_env("ICEBOX_FUNCTIONS_DIR", REPO_ROOT / "functions")


def traces_dir() -> Path:
    """The Azure trace samples: ../shared/traces next to the repository (ICEBOX_TRACES_DIR)."""
    return _from_env("ICEBOX_TRACES_DIR", REPO_ROOT.parent / "shared" / "traces")


def default_auth_file() -> Path:
    """The key `make run` leaves in its state directory (scripts/run.sh uses ./var)."""
    return REPO_ROOT / "var" / "auth"


def java_examples_jar() -> Path:
    """The Java examples (`make setup` builds them); its `Hello` is the Java no-op baseline."""
    return REPO_ROOT / "examples" / "java" / "target" / "icebox-examples.jar"
