"""Azure Functions Invocation Trace 2021 (Zhang et al., SOSP'21): one row per invocation.

File: `app,func,end_timestamp,duration`, both in seconds; the invocation started at
`end_timestamp - duration`. A function's average duration (for mapping by duration) is the
mean of all its rows in the file, not only those inside the window.
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from pathlib import Path

from .model import Trace, TraceInvocation, Window

COLUMNS = ("app", "func", "end_timestamp", "duration")


def is_header(header: list[str]) -> bool:
    return set(COLUMNS) <= {name.strip() for name in header}


def start_time(end_timestamp: float, duration: float) -> float:
    return end_timestamp - duration


def load(path: Path, *, window: Window = Window()) -> Trace:
    skipped: Counter = Counter()
    invocations: list[TraceInvocation] = []
    total_s: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or not is_header(header):
            raise ValueError(f"{path}: not a 2021 invocations file (expected columns {','.join(COLUMNS)})")
        header = [name.strip() for name in header]
        index = {name: header.index(name) for name in COLUMNS}
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(header):
                skipped["wrong number of fields"] += 1
                continue
            function = row[index["func"]].strip()
            try:
                end = float(row[index["end_timestamp"]])
                duration = float(row[index["duration"]])
            except ValueError:
                skipped["end_timestamp or duration is not a number"] += 1
                continue
            if not function:
                skipped["empty func"] += 1
                continue
            if not (math.isfinite(end) and math.isfinite(duration)) or duration < 0:
                skipped["negative or non-finite duration or timestamp"] += 1
                continue
            total_s[function] += duration
            count[function] += 1
            start = start_time(end, duration)
            if window.contains(start):
                invocations.append(TraceInvocation(start, function))
    invocations.sort()
    durations = {f: 1000.0 * total_s[f] / count[f] for f in count}
    return Trace("azure2021", invocations, durations, skipped, {"invocations": str(path)})
