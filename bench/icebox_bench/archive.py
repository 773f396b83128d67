"""Build an action's `exec` body from a function's path: text, a zipped directory, or a jar."""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path

# Never shipped: caches that differ per machine and make the archive non-reproducible.
_EXCLUDED_DIRS = {"__pycache__", ".git", ".pytest_cache"}
_EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
# A fixed timestamp makes the zip byte-identical for identical sources.
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def zip_directory(directory: Path) -> bytes:
    """A deterministic zip of `directory`'s files, paths relative to it, sorted."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory)
            if any(part in _EXCLUDED_DIRS for part in rel.parts) or path.suffix in _EXCLUDED_SUFFIXES:
                continue
            if path.is_file():
                info = zipfile.ZipInfo(rel.as_posix(), date_time=_FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                # Keep the executable bit (e.g. for a bundled binary); regular file type.
                info.external_attr = (0o100000 | (path.stat().st_mode & 0o777)) << 16
                zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def exec_body(path: Path, kind: str, main: str | None) -> dict:
    """OpenWhisk `exec` for the function at `path`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"function code not found: {path}")
    if path.is_dir():
        code, binary = base64.b64encode(zip_directory(path)).decode("ascii"), True
    elif path.suffix in (".jar", ".zip"):
        code, binary = base64.b64encode(path.read_bytes()).decode("ascii"), True
    else:
        code, binary = path.read_text(), False
    body = {"kind": kind, "code": code, "binary": binary}
    if main:
        body["main"] = main
    return body
