"""Load an Azure Functions trace (2019 per-minute counts or 2021 per-invocation rows).

`open_trace` accepts a directory (the samples' layout, or a downloaded day of the full
dataset) or the invocations file itself, and detects the format from the header.
"""

from __future__ import annotations

import csv
from pathlib import Path

from . import azure2019, azure2021
from .model import Trace, TraceInvocation, Window

FORMATS = ("auto", "azure2019", "azure2021")

# File names of the samples first, then those of the full public datasets.
_INVOCATION_NAMES = ("invocations.csv", "invocations_per_function_md.anon.d*.csv", "AzureFunctionsInvocationTrace*.txt")
_DURATION_NAMES = ("durations.csv", "function_durations_percentiles.anon.d*.csv")


def _single_match(directory: Path, patterns: tuple[str, ...], what: str) -> Path | None:
    for pattern in patterns:
        matches = sorted(directory.glob(pattern))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(m.name for m in matches[:5])
            raise ValueError(f"{directory} holds several {what} files ({names}): pass one of them")
    return None


def find_files(path: Path) -> tuple[Path, Path | None]:
    """(invocations file, durations file or None) for a trace directory or file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace not found: {path}")
    if path.is_file():
        durations = _single_match(path.parent, _DURATION_NAMES, "durations")
        return path, durations
    invocations = _single_match(path, _INVOCATION_NAMES, "invocations")
    if invocations is None:
        raise FileNotFoundError(f"{path} has no invocations file (looked for {', '.join(_INVOCATION_NAMES)})")
    return invocations, _single_match(path, _DURATION_NAMES, "durations")


def detect_format(invocations: Path) -> str:
    with open(invocations, newline="") as f:
        header = next(csv.reader(f), None) or []
    if azure2021.is_header(header):
        return "azure2021"
    if azure2019.is_invocations_header(header):
        return "azure2019"
    raise ValueError(f"{invocations}: unknown trace format (header starts {','.join(header[:5])!r})")


def open_trace(
    path: Path,
    *,
    format: str = "auto",
    durations: Path | None = None,
    window: Window = Window(),
    expansion: str = "even",
    seed: int = 0,
) -> Trace:
    if format not in FORMATS:
        raise ValueError(f"unknown trace format {format!r}; expected one of {', '.join(FORMATS)}")
    invocations, found_durations = find_files(Path(path))
    if format == "auto":
        format = detect_format(invocations)
    if format == "azure2021":
        return azure2021.load(invocations, window=window)
    return azure2019.load(invocations, durations or found_durations, window=window, expansion=expansion, seed=seed)


__all__ = ["FORMATS", "Trace", "TraceInvocation", "Window", "open_trace", "find_files", "detect_format"]
