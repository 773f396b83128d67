"""PNG plots with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from ..stats import cdf  # noqa: E402
from ..units import MIB  # noqa: E402
from .load import RunData  # noqa: E402
from .metrics import RunMetrics, measured_invocations  # noqa: E402

STATES = ("prewarmed", "creating", "initializing", "running", "idle", "frozen")
STATE_COLORS = {
    "prewarmed": "#dddddd",
    "creating": "#bbbbbb",
    "initializing": "#f0a35e",
    "running": "#d9534f",
    "idle": "#5bc0de",
    "frozen": "#337ab7",
}


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def latency_cdf(runs: list[RunData], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        latencies = [r["latency_ms"] for r in measured_invocations(run) if r.get("status") == "success"]
        if latencies:
            xs, ys = cdf(latencies)
            ax.step(xs, ys, where="post", label=f"{run.label} (n={len(xs)})")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of successful invocations")
    ax.set_title("Latency CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    return _save(fig, path)


def _state_series(run: RunData, start_ms: float):
    times = []
    by_state = {s: [] for s in STATES}
    for sample in run.memory:
        times.append((sample["t_ms"] - start_ms) / 1000.0)
        sums = dict.fromkeys(STATES, 0)
        for row in sample.get("instances") or []:
            if row.get("state") in sums:
                sums[row["state"]] += row.get("uss", 0)
        for s in STATES:
            by_state[s].append(sums[s] / MIB)
    return times, by_state


def memory_timeline(runs: list[RunData], metrics: list[RunMetrics], path: Path) -> Path:
    """Stacked USS by instance state over time, one panel per run (shared axes)."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.8 * len(runs) + 0.6), sharex=True, sharey=True, squeeze=False)
    for ax, run, m in zip(axes[:, 0], runs, metrics, strict=True):
        origin = m.start_ms or (run.memory[0]["t_ms"] if run.memory else 0.0)
        times, by_state = _state_series(run, origin)
        if times:
            ax.stackplot(
                times,
                *[by_state[s] for s in STATES],
                labels=STATES,
                colors=[STATE_COLORS[s] for s in STATES],
                step="post",
            )
        ax.set_title(run.label, fontsize="medium")
        ax.set_ylabel("USS (MiB)")
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("time since the measured window began (s)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=len(STATES), fontsize="small", frameon=False)
    fig.suptitle("Instance memory by state (USS, stacked)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def cold_starts_over_time(runs: list[RunData], metrics: list[RunMetrics], path: Path) -> Path:
    """Cold starts per time bin; the bin is a sixtieth of the longest window (at least 1 s)."""
    longest = max((m.window_s for m in metrics), default=0.0)
    bin_s = max(1.0, longest / 60.0)
    fig, ax = plt.subplots(figsize=(7, 4))
    for run, m in zip(runs, metrics, strict=True):
        starts = [
            (r["start_ms"] - m.start_ms) / 1000.0
            for r in measured_invocations(run)
            if r.get("start_kind") == "cold" and r.get("start_ms") is not None
        ]
        nbins = max(1, int(m.window_s // bin_s) + 1)
        counts = [0] * nbins
        for t in starts:
            counts[min(nbins - 1, max(0, int(t // bin_s)))] += 1
        ax.step([i * bin_s for i in range(nbins)], counts, where="post", label=f"{run.label} ({len(starts)} cold)")
    ax.set_xlabel("time since the measured window began (s)")
    ax.set_ylabel(f"cold starts per {bin_s:g} s")
    ax.set_title("Cold starts over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)
