"""Azure Functions Trace 2019 (Shahrad et al., ATC'20): per-minute invocation counts.

Invocations file: `HashOwner,HashApp,HashFunction,Trigger,<m>,<m+1>,...` where each minute
column holds how many times the function was invoked in that minute (the full dataset has one
file per day with columns 1..1440; the samples hold 480..959). Minute column `m` covers trace
time [60*m, 60*m + 60).

Durations file: `HashOwner,HashApp,HashFunction,Average,Count,Minimum,Maximum,percentile_...`
with the average execution time in ms (cold starts excluded).

A count n is expanded to n timestamps inside its minute, either evenly spaced 60/(n+1) s apart
(`even`, what Desiccant's artifact did: k*60/(n+1) for k = 1..n) or uniformly at random
(`random`). Random draws are seeded per (seed, function, minute), so a minute's timestamps do
not depend on which window was asked for or on the order of the rows.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from pathlib import Path

from .model import Trace, TraceInvocation, Window

EXPANSIONS = ("even", "random")
_ID_COLUMNS = ("HashOwner", "HashApp", "HashFunction", "Trigger")


def expand_minute(
    minute: int, count: int, expansion: str = "even", *, seed: int = 0, function: str = ""
) -> list[float]:
    """Trace times (s) of `count` invocations during minute `minute`, ascending."""
    if count < 0:
        raise ValueError(f"negative invocation count {count}")
    start = 60.0 * minute
    if expansion == "even":
        gap = 60.0 / (count + 1)
        return [start + k * gap for k in range(1, count + 1)]
    if expansion == "random":
        # String seeds are hashed with SHA-512 by `random`, so this is stable across runs and
        # Python versions (unlike hash()).
        rng = random.Random(f"{seed}/{function}/{minute}")
        return sorted(start + 60.0 * rng.random() for _ in range(count))
    raise ValueError(f"unknown expansion {expansion!r}; expected one of {', '.join(EXPANSIONS)}")


def _minute_columns(header: list[str], window: Window) -> list[tuple[int, int]]:
    """(column index, minute) of the minute columns that overlap the window."""
    columns = []
    for index, name in enumerate(header):
        try:
            minute = int(name)
        except ValueError:
            continue
        if window.overlaps(60.0 * minute, 60.0 * minute + 60.0):
            columns.append((index, minute))
    return columns


def is_invocations_header(header: list[str]) -> bool:
    return "HashFunction" in header and any(name.strip().isdigit() for name in header)


def read_invocations(path: Path, window: Window, expansion: str, seed: int, skipped: Counter) -> list[TraceInvocation]:
    invocations: list[TraceInvocation] = []
    seen: set[str] = set()
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or not is_invocations_header(header):
            raise ValueError(f"{path}: not a 2019 invocations file (expected HashFunction and minute columns)")
        header = [name.strip() for name in header]
        func_col = header.index("HashFunction")
        columns = _minute_columns(header, window)
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != len(header):
                skipped["invocations: wrong number of fields"] += 1
                continue
            function = row[func_col].strip()
            if not function:
                skipped["invocations: empty HashFunction"] += 1
                continue
            try:
                counts = [(minute, int(row[index])) for index, minute in columns]
            except ValueError:
                skipped["invocations: count is not an integer"] += 1
                continue
            if any(count < 0 for _, count in counts):
                skipped["invocations: negative count"] += 1
                continue
            if function in seen:
                skipped["invocations: duplicate function"] += 1
                continue
            seen.add(function)
            for minute, count in counts:
                for t in expand_minute(minute, count, expansion, seed=seed, function=function):
                    if window.contains(t):
                        invocations.append(TraceInvocation(t, function))
    return invocations


def read_durations(path: Path, skipped: Counter) -> dict[str, float]:
    durations: dict[str, float] = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or not {"HashFunction", "Average"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: not a 2019 durations file (expected HashFunction and Average columns)")
        for row in reader:
            function = (row.get("HashFunction") or "").strip()
            try:
                average = float(row.get("Average") or "")
            except ValueError:
                skipped["durations: Average is not a number"] += 1
                continue
            if not function or average < 0 or average != average:
                skipped["durations: missing function or negative average"] += 1
                continue
            if function in durations:
                skipped["durations: duplicate function"] += 1
                continue
            durations[function] = average
    return durations


def load(
    invocations_path: Path,
    durations_path: Path | None = None,
    *,
    window: Window = Window(),
    expansion: str = "even",
    seed: int = 0,
) -> Trace:
    """Read a 2019 trace, expanding only the minutes that overlap `window`."""
    if expansion not in EXPANSIONS:
        raise ValueError(f"unknown expansion {expansion!r}; expected one of {', '.join(EXPANSIONS)}")
    skipped: Counter = Counter()
    invocations = read_invocations(Path(invocations_path), window, expansion, seed, skipped)
    invocations.sort()
    durations = read_durations(Path(durations_path), skipped) if durations_path else {}
    sources = {"invocations": str(invocations_path)}
    if durations_path:
        sources["durations"] = str(durations_path)
    return Trace("azure2019", invocations, durations, skipped, sources)
