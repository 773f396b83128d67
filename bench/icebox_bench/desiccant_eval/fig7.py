"""Fig. 7 (Desiccant §5.2): one instance's memory after n executions, frozen, per mode.

Per function (MB = MiB):

* vanilla_uss_mb   — the USS of an instance in mode vanilla after n invocations, once frozen;
* eager_uss_mb     — the same in mode eager (the runtime collects fully after every /run);
* desiccant_uss_mb — an instance in mode desiccant after n invocations, frozen, then
                     reclaimed through the node API, once frozen again;
* ideal_uss_mb     — start-up USS + the live heap beyond a bare runtime's (a lower bound,
                     fig7_run.Measurement.ideal). details.json also has the paper's reading,
                     `ideal_heap_only`: the vanilla instance less its garbage and free heap.

Per language, the means over its functions of the per-function ratios vanilla/desiccant,
eager/desiccant and desiccant/ideal: the paper's "1.21× to 4.57× for Java functions (2.78× on
average)" is a mean of per-function reductions. The ratios are computed from the rounded MiB
figures in summary.json, so a reader can recompute them from the file alone.
"""

from __future__ import annotations

import math

from ..units import MIB

KEYS = ("vanilla_uss_mb", "eager_uss_mb", "desiccant_uss_mb", "ideal_uss_mb")
RATIOS = ("vanilla_over_desiccant", "eager_over_desiccant", "desiccant_over_ideal")

# Desiccant §5.2: mean reductions vs vanilla and eager, and the mean distance to the ideal
# ("0.1% on average for Java functions and 6.4% on average for JavaScript functions").
PAPER = {
    "java": {"vanilla_over_desiccant": 2.78, "eager_over_desiccant": 1.36, "desiccant_over_ideal": 1.001},
    "nodejs": {"vanilla_over_desiccant": 1.93, "eager_over_desiccant": 1.55, "desiccant_over_ideal": 1.064},
}
# Issue 4's targets: mean memory ≥3× below vanilla for Java, ≥2.5× for Node; within 10% of ideal.
TARGET_VANILLA_OVER_DESICCANT = {"java": 3.0, "nodejs": 2.5}
TARGET_DESICCANT_OVER_IDEAL = 1.10


def mib(value: int | float) -> float:
    return round(value / MIB, 3)


def function_entry(language: str, *, vanilla: int, eager: int, desiccant: int, ideal: int) -> dict:
    """The summary.json entry of one function, from bytes (exactly the issue's keys)."""
    values = (vanilla, eager, desiccant, ideal)
    if any(v <= 0 for v in values):
        raise ValueError(f"a memory figure is not positive: {dict(zip(KEYS, values, strict=True))}")
    return {"language": language, **{k: mib(v) for k, v in zip(KEYS, values, strict=True)}}


def ratios(entry: dict) -> dict:
    d = entry["desiccant_uss_mb"]
    return {
        "vanilla_over_desiccant": entry["vanilla_uss_mb"] / d,
        "eager_over_desiccant": entry["eager_uss_mb"] / d,
        "desiccant_over_ideal": d / entry["ideal_uss_mb"],
    }


def _groups(functions: dict[str, dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for entry in functions.values():
        groups.setdefault(entry["language"], []).append(entry)
    return dict(sorted(groups.items()))


def by_language(functions: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for language, entries in _groups(functions).items():
        per_function = [ratios(e) for e in entries]
        out[language] = {k: round(sum(r[k] for r in per_function) / len(per_function), 4) for k in RATIOS}
    return out


def summary(functions: dict[str, dict]) -> dict:
    """summary.json: {"functions": {...}, "by_language": {...}} and nothing else."""
    return {"functions": functions, "by_language": by_language(functions)}


def aggregates(functions: dict[str, dict]) -> dict[str, dict]:
    """Other readings of the same data, for details.json: per language the ratio of the mean
    memories (the reading of "mean memory ... below vanilla") and geometric means."""
    out = {}
    for language, entries in _groups(functions).items():
        means = {k: sum(e[k] for e in entries) / len(entries) for k in KEYS}
        per_function = [ratios(e) for e in entries]
        out[language] = {
            "functions": len(entries),
            "mean_mb": {k: round(v, 3) for k, v in means.items()},
            "ratio_of_means": {
                "vanilla_over_desiccant": round(means["vanilla_uss_mb"] / means["desiccant_uss_mb"], 4),
                "eager_over_desiccant": round(means["eager_uss_mb"] / means["desiccant_uss_mb"], 4),
                "desiccant_over_ideal": round(means["desiccant_uss_mb"] / means["ideal_uss_mb"], 4),
            },
            "geometric_mean": {
                k: round(math.exp(sum(math.log(r[k]) for r in per_function) / len(per_function)), 4) for k in RATIOS
            },
        }
    return out


def targets(summary_: dict) -> list[dict]:
    """Issue 4's Fig. 7 targets, each with the measured value and whether it is met."""
    rows = []
    for language, g in summary_["by_language"].items():
        want = TARGET_VANILLA_OVER_DESICCANT.get(language)
        if want is not None:
            rows.append(
                {
                    "language": language,
                    "target": f"vanilla/desiccant >= {want}",
                    "value": g["vanilla_over_desiccant"],
                    "met": g["vanilla_over_desiccant"] >= want,
                }
            )
        if language in TARGET_VANILLA_OVER_DESICCANT:
            rows.append(
                {
                    "language": language,
                    "target": f"desiccant/ideal <= {TARGET_DESICCANT_OVER_IDEAL}",
                    "value": g["desiccant_over_ideal"],
                    "met": g["desiccant_over_ideal"] <= TARGET_DESICCANT_OVER_IDEAL,
                }
            )
    return rows


def heap_only_by_language(functions: dict[str, dict], details: dict[str, dict]) -> dict[str, float]:
    """Per language, the mean of desiccant / the paper's heap-only ideal, from details.json's
    per-function `ideal_heap_only` (functions without it are left out)."""
    ratios_: dict[str, list[float]] = {}
    for name, entry in functions.items():
        ideal = ((details.get(name) or {}).get("ideal_heap_only") or {}).get("uss")
        if ideal:
            ratios_.setdefault(entry["language"], []).append(entry["desiccant_uss_mb"] / mib(ideal))
    return {lang: round(sum(v) / len(v), 4) for lang, v in sorted(ratios_.items())}
