"""Fig. 12 (FaaSMem §8.2): per load (high, low) and offload mode (none, tmo, faasmem), per
benchmark function: mean local memory normalised to mode none, p95 latency, cold-start share,
bytes icebox offloaded and refaulted; the node's totals; the targets.

Definitions (one run = one load in one mode, its own daemon; window = result.json's
`window_ms`, the replay's start to the end of its tail):

* local memory: local_memory.LocalSeries, time-averaged over the window; node = the sum;
* latency: client-side end to end, every successful measured invocation (cold starts
  included), report.metrics' percentiles; cold-start share = cold / (cold + warm);
* offloaded / refaulted per function: the larger of the events' sum and the instance counters'
  (counters.py: both are lower bounds of the truth, missing different things); node: the
  Prometheus counters' increase;
* targets: faasmem's mean local memory >= 40% below none's with p95 at most 5% above none's;
  faasmem offloads >= 10x what tmo does with p95 at most 5% above tmo's. Checked per function
  and for the node (sum of local memory; p95 over every invocation of the load).
"""

from __future__ import annotations

from pathlib import Path

from ..recorder import read_jsonl
from ..report.load import RunData, load_run
from ..report.metrics import compute
from ..stats import percentile
from ..units import MIB
from .counters import event_totals, instance_totals, node_totals
from .local_memory import LocalSeries, normalise, pool_means
from .overheads import run_overheads

MODES = ("none", "tmo", "faasmem")
TARGET_MEMORY_REDUCTION = 0.40
TARGET_P95_SLACK = 0.05
TARGET_OFFLOAD_RATIO = 10.0
NODE = "(node)"


def run_window(run: RunData) -> tuple[float, float]:
    """result.json's window_ms, else the span of the memory samples."""
    window = run.result.get("window_ms")
    if window and window[1] > window[0]:
        return float(window[0]), float(window[1])
    times = [s["t_ms"] for s in run.memory if s.get("t_ms") is not None]
    if len(times) < 2:
        raise ValueError(f"{run.path}: no window (result.json has no window_ms and there are < 2 memory samples)")
    return min(times), max(times)


def _mib(value) -> float | None:
    return None if value is None else round(value / MIB, 3)


def analyse_run(path: Path, functions: list[str]) -> dict:
    """One run directory -> its summary entry."""
    run = load_run(path)
    start, end = run_window(run)
    series = LocalSeries(run.memory, functions)
    remote_view = LocalSeries(run.memory, functions, measure="uss")
    if run.config.get("mode") != "none":  # without offloading, USS is the local memory anyway
        series.check()
    metrics = compute(run)
    by_function = {f.function: f for f in metrics.functions}
    events = event_totals(run.events, start, end)
    instances = instance_totals(run.memory, start, end)
    prom, cpu = read_jsonl(path / "offload.jsonl"), read_jsonl(path / "cpu.jsonl")
    node = node_totals(prom, start, end)
    out_functions = {}
    for name in functions:
        f = by_function.get(name)
        ev, inst = events.get(name, {}), instances.get(name, {})
        offloaded = max(ev.get("offloaded_bytes", 0), inst.get("offloaded_bytes", 0))
        refaulted = max(ev.get("refaulted_bytes", 0), inst.get("refaulted_bytes", 0))
        successes = f.successes if f else 0
        out_functions[name] = {
            "invocations": f.invocations if f else 0,
            "successes": successes,
            "latency_ms": {p: _round((f.latency_ms if f else {}).get(p), 1) for p in ("p50", "p95", "p99")},
            "cold_start_share": _round(f.cold_start_rate if f else None, 4),
            "local_mean_mib": _mib(series.mean(name, start / 1000.0, end / 1000.0)),
            "local_peak_mib": _mib(series.peak(name, start / 1000.0, end / 1000.0)),
            "uss_mean_mib": _mib(remote_view.mean(name, start / 1000.0, end / 1000.0)),
            "offloaded_mib": _mib(offloaded),
            "refaulted_mib": _mib(refaulted),
            "offloaded_events_mib": _mib(ev.get("offloaded_bytes", 0)),
            "offloaded_instances_mib": _mib(inst.get("offloaded_bytes", 0)),
            "offloaded_by_step_mib": {k: _mib(v) for k, v in sorted(ev.get("by_step", {}).items())},
            "refaulted_per_request_kib": round(refaulted / successes / 1024, 1) if successes else None,
        }
    ok = [r["latency_ms"] for r in run.invocations if not r.get("warmup") and r.get("status") == "success"]
    return {
        "functions": out_functions,
        "node": {
            "invocations": metrics.invocations,
            "successes": metrics.successes,
            "latency_ms": {"p95": _round(percentile(ok, 95), 1) if ok else None},
            "cold_start_share": _round(metrics.cold_start_rate, 4),
            "local_mean_mib": _mib(series.total_mean(start / 1000.0, end / 1000.0)),
            "uss_mean_mib": _mib(remote_view.total_mean(start / 1000.0, end / 1000.0)),
            "offloaded_mib": _mib(node["offloaded_bytes"]),
            "refaulted_mib": _mib(node["refaulted_bytes"]),
            "offloaded_by_step_mib": {k: _mib(v) for k, v in node["offloaded_by_step"].items()},
            "pool": {
                k: (_mib(v) if k.endswith("_mean") else v)
                for k, v in pool_means(run.memory, start / 1000.0, end / 1000.0).items()
            },
        },
        "overheads": run_overheads(
            prom, cpu, start, end, requests=metrics.successes, refaulted_bytes=node["refaulted_bytes"]
        ),
        "window_s": round((end - start) / 1000.0, 3),
        "fallback_rows": series.fallback_rows,
        "statuses": metrics.statuses,
    }


def _round(value, digits: int):
    return None if value is None else round(value, digits)


def _ratio(a, b) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def _rows(entry: dict) -> dict[str, dict]:
    """Per function and the node: the figures compared across modes."""
    return {**entry.get("functions", {}), NODE: entry.get("node", {})}


def compare(load_runs: dict[str, dict]) -> dict[str, dict]:
    """Per function (and NODE): local memory normalised to none, p95 relative to none and tmo,
    faasmem's offloaded bytes over tmo's."""
    none, tmo, faasmem = (load_runs.get(m) for m in MODES)
    names = sorted({n for e in load_runs.values() for n in _rows(e)}, key=lambda n: (n == NODE, n))
    out = {}
    for name in names:
        rows = {m: _rows(e).get(name, {}) for m, e in load_runs.items()}
        local = {m: r.get("local_mean_mib") for m, r in rows.items()}
        uss = {m: r.get("uss_mean_mib") for m, r in rows.items()}
        p95 = {m: (r.get("latency_ms") or {}).get("p95") for m, r in rows.items()}
        out[name] = {
            "local_normalised": normalise(local, {m: local.get("none") for m in local}) if none else {},
            # The pool's RAM left out: local memory as the paper measured it (a remote pool).
            "uss_normalised": normalise(uss, {m: uss.get("none") for m in uss}) if none else {},
            "p95_vs_none": {m: _ratio(p95[m], p95.get("none")) for m in p95} if none else {},
            "faasmem_p95_vs_tmo": _ratio(p95.get("faasmem"), p95.get("tmo")) if tmo and faasmem else None,
            "offload_faasmem_over_tmo": (
                _ratio(rows["faasmem"].get("offloaded_mib"), rows["tmo"].get("offloaded_mib"))
                if tmo and faasmem
                else None
            ),
        }
    return out


def targets(load: str, comparison: dict[str, dict], load_runs: dict[str, dict]) -> list[dict]:
    rows = []
    for name, c in comparison.items():
        norm = c["local_normalised"].get("faasmem")
        p95 = c["p95_vs_none"].get("faasmem")
        remote = (c.get("uss_normalised") or {}).get("faasmem")
        if norm is not None or p95 is not None:
            rows.append(
                {
                    "load": load,
                    "function": name,
                    "target": f"faasmem local memory >= {TARGET_MEMORY_REDUCTION:.0%} below none, "
                    f"p95 within +{TARGET_P95_SLACK:.0%}",
                    "value": {
                        "reduction": None if norm is None else round(1 - norm, 4),
                        "reduction_pool_remote": None if remote is None else round(1 - remote, 4),
                        "p95_vs_none": p95,
                    },
                    "met": norm is not None
                    and p95 is not None
                    and 1 - norm >= TARGET_MEMORY_REDUCTION
                    and p95 <= 1 + TARGET_P95_SLACK,
                }
            )
        if "tmo" in load_runs and "faasmem" in load_runs:
            ratio, p95_tmo = c["offload_faasmem_over_tmo"], c["faasmem_p95_vs_tmo"]
            tmo_zero = not _rows(load_runs["tmo"]).get(name, {}).get("offloaded_mib")
            faasmem_some = bool(_rows(load_runs["faasmem"]).get(name, {}).get("offloaded_mib"))
            rows.append(
                {
                    "load": load,
                    "function": name,
                    "target": f"faasmem offloads >= {TARGET_OFFLOAD_RATIO:g}x tmo, p95 within "
                    f"+{TARGET_P95_SLACK:.0%} of tmo's",
                    "value": {"offload_ratio": ratio, "p95_vs_tmo": p95_tmo, "tmo_offloaded_nothing": tmo_zero},
                    "met": p95_tmo is not None
                    and p95_tmo <= 1 + TARGET_P95_SLACK
                    and ((ratio is not None and ratio >= TARGET_OFFLOAD_RATIO) or (tmo_zero and faasmem_some)),
                }
            )
    return rows


def summary(config: dict, runs: dict[str, dict[str, dict]]) -> dict:
    """runs: {load: {mode: analyse_run entry}}."""
    comparison = {load: compare(r) for load, r in runs.items()}
    rows = [t for load, r in runs.items() for t in targets(load, comparison[load], r)]
    return {"config": config, "runs": runs, "comparison": comparison, "targets": rows}
