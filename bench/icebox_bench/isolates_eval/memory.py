"""isolates-memory (thesis Table 4.1, Figs. 4.1–4.4): per function and sharing mode, the
action's total memory with n activations in flight, fitted as base + increment (fit.py).

Per level, `points` keeps the peak and mean of the samples taken while all n ran, in MiB; the
fit uses the peak (the thesis fits the memory a level needs, an upper bound). summary.json:

    {"measure": "pss", "levels": [1, 2, 4, 8, 16],
     "functions": {F: {"modes": {M: {"points": {"1": {"peak_mb", "mean_mb", ...}, ...},
                                     "fit": {"slope_mb", "increment_mb", "base_mb", "base0_mb", "points"}}},
                       "isolate_over_process_at_8": {"measured": r, "fitted": r},
                       "crossover": {"fitted": n, "measured": n}}},
     "targets": [{"function", "target", "value", "met"}]}

`crossover` is the first n at which isolate is no longer cheaper than shared (null: cheaper at
every n up to 64 fitted, or every level measured).
"""

from __future__ import annotations

from ..units import MIB
from . import fit as fitting

TARGET_ISOLATE_OVER_PROCESS_AT_8 = 0.6
RATIO_LEVEL = 8


def level_point(samples: list[dict], measure: str, *, invocations: int, failures: int) -> dict:
    """One level's entry from its samples (bytes) — peak and mean of `measure`, in MiB."""
    values = [s[measure] for s in samples if s.get("instances")]
    if not values:
        raise ValueError("no memory sample while the level ran")
    return {
        "peak_mb": round(max(values) / MIB, 3),
        "mean_mb": round(sum(values) / len(values) / MIB, 3),
        "samples": len(values),
        "instances": max(s["instances"] for s in samples),
        "in_flight_mean": round(sum(s["in_flight"] for s in samples) / len(samples), 2),
        "invocations": invocations,
        "failures": failures,
    }


def peaks(points: dict) -> dict[int, float]:
    return {int(n): p["peak_mb"] for n, p in points.items()}


def mode_entry(points: dict) -> dict:
    return {"points": points, "fit": fitting.fit(peaks(points)).to_json()}


def function_entry(modes: dict[str, dict]) -> dict:
    """{mode: {"points": ...}} → the function's summary entry with fits and comparisons."""
    out: dict = {"modes": {m: mode_entry(e["points"]) for m, e in modes.items() if e.get("points")}}
    fitted = out["modes"]
    fit = {mode: fitting.Fit.from_json(e["fit"]) for mode, e in fitted.items()}
    if "isolate" in fitted and "process" in fitted:
        iso, proc = peaks(fitted["isolate"]["points"]), peaks(fitted["process"]["points"])
        measured = (
            round(iso[RATIO_LEVEL] / proc[RATIO_LEVEL], 4) if RATIO_LEVEL in iso and RATIO_LEVEL in proc else None
        )
        out["isolate_over_process_at_8"] = {
            "measured": measured,
            "fitted": round(fit["isolate"].limit(RATIO_LEVEL) / fit["process"].limit(RATIO_LEVEL), 4),
        }
    if "isolate" in fitted and "shared" in fitted:
        out["crossover"] = {
            "fitted": fitting.crossover(fit["isolate"], fit["shared"]),
            "measured": fitting.measured_crossover(
                peaks(fitted["isolate"]["points"]), peaks(fitted["shared"]["points"])
            ),
        }
    return out


def targets(functions: dict[str, dict]) -> list[dict]:
    rows = []
    for name, f in sorted(functions.items()):
        ratio = (f.get("isolate_over_process_at_8") or {}).get("measured")
        if ratio is not None:
            rows.append(
                {
                    "function": name,
                    "target": f"isolate/process memory at n=8 <= {TARGET_ISOLATE_OVER_PROCESS_AT_8}",
                    "value": ratio,
                    "met": ratio <= TARGET_ISOLATE_OVER_PROCESS_AT_8,
                }
            )
    return rows


def summary(measure: str, levels: list[int], functions: dict[str, dict]) -> dict:
    return {"measure": measure, "levels": levels, "functions": functions, "targets": targets(functions)}
