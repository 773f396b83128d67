"""Parsing of the command line's times and sizes."""

from __future__ import annotations

import re

_TIME = re.compile(r"^\s*(-?\d+(?:\.\d*)?|-?\.\d+)\s*(ms|s|m|min|h)?\s*$")
_FACTOR = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0, "h": 3600.0}

MIB = 1024 * 1024
GIB = 1024 * MIB


def parse_seconds(text: str) -> float:
    """'90', '90s', '1.5m', '480m', '8h', '250ms' -> seconds. A bare number is seconds."""
    match = _TIME.match(str(text))
    if not match:
        raise ValueError(f"invalid time {text!r} (examples: 90, 90s, 480m, 8h, 250ms)")
    return float(match.group(1)) * _FACTOR[match.group(2)]


def parse_window(text: str) -> tuple[float | None, float | None]:
    """'480m:482m' -> (28800.0, 28920.0); either side may be empty ('480m:' or ':10m')."""
    if ":" not in text:
        raise ValueError(f"invalid window {text!r}: expected START:END, e.g. 480m:482m")
    start, end = text.split(":", 1)
    lo = parse_seconds(start) if start.strip() else None
    hi = parse_seconds(end) if end.strip() else None
    if lo is not None and hi is not None and hi <= lo:
        raise ValueError(f"invalid window {text!r}: the end is not after the start")
    return lo, hi


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(B|KiB|MiB|GiB|TiB)?\s*$")
_SIZE_FACTOR = {None: 1, "B": 1, "KiB": 1024, "MiB": MIB, "GiB": GIB, "TiB": 1024 * GIB}


def parse_bytes(text: str) -> int:
    """'2GiB', '512MiB', '4096' -> bytes (binary units, as iceboxd's sizes)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"invalid size {text!r} (examples: 2GiB, 512MiB, 4096)")
    return int(float(match.group(1)) * _SIZE_FACTOR[match.group(2)])
