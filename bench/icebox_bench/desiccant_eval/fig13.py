"""Fig. 13 (Desiccant §5.6): how much slower a function runs right after a reclaim.

Per function and reclaim variant: n invocations in one instance (130 in the paper: JIT
compilation settles), the reclaim, then w more (10). before = the mean execution time of the
last w invocations before the reclaim, after = the mean of the w after it;
slowdown = after / before − 1 (the paper: 8.3% on average; issue 4's target ≤ 8%).

Execution time is the activation's `duration` (the daemon's measure of /run): the reclaim's
cost shows there as page faults and deoptimized code. Client-side latency (with the thaw and
the HTTP round trip, the same before and after) is kept as a second reading, and the same ratio
of the windows' medians as a third, which one invocation slowed by other work on a shared
machine does not move.
"""

from __future__ import annotations

import statistics

from ..units import MIB

PAPER_MEAN_SLOWDOWN = 0.083
TARGET_MEAN_SLOWDOWN = 0.08


def mean(values: list[float]) -> float:
    if not values:
        raise ValueError("no values")
    return sum(values) / len(values)


def variant_entry(
    before_ms: list[float],
    after_ms: list[float],
    *,
    before_latency_ms: list[float],
    after_latency_ms: list[float],
    report: dict,
) -> dict:
    """One (function, variant) of summary.json: the windows' execution times (ms) and the reclaim."""
    before, after = mean(before_ms), mean(after_ms)
    if before <= 0:
        raise ValueError("the mean execution time before the reclaim is not positive")
    lb, la = mean(before_latency_ms), mean(after_latency_ms)
    return {
        "before_ms": round(before, 3),
        "after_ms": round(after, 3),
        "slowdown": round(after / before - 1.0, 4),
        "first_after_ms": round(after_ms[0], 3),
        "median_slowdown": round(statistics.median(after_ms) / statistics.median(before_ms) - 1.0, 4),
        "latency_slowdown": round(la / lb - 1.0, 4) if lb > 0 else None,
        "freed_mb": round(int(report.get("freed", 0) or 0) / MIB, 3),
        "reclaim_cpu_ms": report.get("cpu_ms"),
        "reclaim_wall_ms": round(float(report.get("wall_ms", 0.0) or 0.0), 3),
    }


def by_language(functions: dict[str, dict]) -> dict[str, dict]:
    """Per language and variant: mean and max slowdown over the functions."""
    groups: dict[str, dict[str, list[float]]] = {}
    for entry in functions.values():
        for variant, v in entry["variants"].items():
            groups.setdefault(entry["language"], {}).setdefault(variant, []).append(v["slowdown"])
    return {
        language: {
            variant: {"mean_slowdown": round(mean(s), 4), "max_slowdown": round(max(s), 4), "functions": len(s)}
            for variant, s in sorted(variants.items())
        }
        for language, variants in sorted(groups.items())
    }


def mean_default_slowdown(functions: dict[str, dict]) -> float | None:
    """The headline: mean over functions of the slowdown with their runtime's default variant."""
    values = [
        f["variants"][f["default_variant"]]["slowdown"]
        for f in functions.values()
        if f.get("default_variant") in f["variants"]
    ]
    return round(mean(values), 4) if values else None


def summary(functions: dict[str, dict], *, before_runs: int, window: int, pause_s: float = 0.0) -> dict:
    return {
        "runs": {"before": before_runs, "window": window, "pause_s": pause_s},
        "functions": functions,
        "by_language": by_language(functions),
        "mean_slowdown_default": mean_default_slowdown(functions),
    }


def parse_variants(text: str) -> dict[str, list[str]]:
    """'nodejs=a,b;java=c' -> {"nodejs": ["a", "b"], "java": ["c"]} (empty parts ignored)."""
    out: dict[str, list[str]] = {}
    for part in (p.strip() for p in str(text).split(";")):
        if not part:
            continue
        language, sep, names = part.partition("=")
        if not sep or not language.strip():
            raise ValueError(f"invalid --variants part {part!r}: expected LANGUAGE=VARIANT[,VARIANT...]")
        out[language.strip()] = [n.strip() for n in names.split(",") if n.strip()]
    return out
