"""Frozen garbage (Desiccant §3.1): how much of an instance's memory is not needed.

real_i  = the instance's USS right after invocation i exited;
ideal_i = the instance's USS right after start-up + the live bytes of its heap after a full
          collection at exit i, less the live bytes of a bare runtime (which the start-up
          memory already contains; see baseline.py);
ratio_i = real_i / ideal_i.
Per function: avg_ratio = mean over i, max_ratio = max over i. Per language: the mean of the
functions' avg_ratio and of their max_ratio (the paper's headline numbers are the latter:
Java 2.72, JavaScript 2.15).
"""

from __future__ import annotations

from ..units import MIB

# Desiccant §3.1, "the average number of maximum ratios" per language.
PAPER_MEAN_MAX_RATIO = {"java": 2.72, "nodejs": 2.15}


def ideal_series(startup_bytes: int, live_bytes: list[int], baseline_live_bytes: int = 0) -> list[int]:
    """Start-up memory plus what the function keeps alive beyond a bare runtime."""
    return [startup_bytes + max(0, live - baseline_live_bytes) for live in live_bytes]


def ratios(real: list[int], ideal: list[int]) -> list[float]:
    if len(real) != len(ideal):
        raise ValueError(f"{len(real)} real measurements but {len(ideal)} ideal ones")
    if any(i <= 0 for i in ideal):
        raise ValueError("an ideal memory figure is not positive")
    return [r / i for r, i in zip(real, ideal, strict=True)]


def to_mib(values: list[int]) -> list[float]:
    return [round(v / MIB, 3) for v in values]


def function_summary(language: str, real_bytes: list[int], ideal_bytes: list[int]) -> dict:
    """The summary.json entry of one function (exactly the issue's keys)."""
    rs = ratios(real_bytes, ideal_bytes)
    return {
        "language": language,
        "avg_ratio": round(sum(rs) / len(rs), 4),
        "max_ratio": round(max(rs), 4),
        "uss_mb": to_mib(real_bytes),
        "ideal_mb": to_mib(ideal_bytes),
    }


def by_language(functions: dict[str, dict]) -> dict[str, dict]:
    groups: dict[str, list[dict]] = {}
    for entry in functions.values():
        groups.setdefault(entry["language"], []).append(entry)
    return {
        language: {
            "avg_ratio": round(sum(e["avg_ratio"] for e in entries) / len(entries), 4),
            "max_ratio": round(sum(e["max_ratio"] for e in entries) / len(entries), 4),
            "functions": len(entries),
        }
        for language, entries in sorted(groups.items())
    }


def summary(functions: dict[str, dict]) -> dict:
    return {"functions": functions, "by_language": by_language(functions)}
