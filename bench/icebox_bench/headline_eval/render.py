"""The headline run's plots and page: memory over time stacked by instance state (per mode),
latency CDFs per mode, cold starts per mode; headline.md with the table and the goals."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from ..recorder import read_jsonl  # noqa: E402
from ..report.tables import fmt, markdown_table  # noqa: E402
from ..stats import cdf  # noqa: E402
from ..units import MIB  # noqa: E402
from . import metrics  # noqa: E402

STACK = (*metrics.PLOT_STATES, "pool RAM")


def write_series(mode_dir: Path, samples: list[dict], actions: set[str]) -> None:
    """series.json: per sample, t_s, MiB per plot state, the disk tier and warm instances held."""
    rows = []
    for s in samples:
        states = metrics.by_state(s)
        rows.append(
            {
                "t_s": s["t_s"],
                **{k: round(v / MIB, 3) for k, v in states.items()},
                "disk tier": round((s.get("swaps") or {}).get("file", 0) / MIB, 3),
                "held": metrics.held(s, actions),
            }
        )
    (mode_dir / "series.json").write_text(json.dumps(rows))


def _memory_plot(out: Path, summary: dict) -> Path:
    names = summary["modes_run"]
    cols = 3
    rows_n = max(1, (len(names) + cols - 1) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 3.2 * rows_n), sharey=True, squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        path = out / name / "series.json"
        series = json.loads(path.read_text()) if path.exists() else []
        if series:
            t = [r["t_s"] for r in series]
            ax.stackplot(t, *[[r.get(k, 0) for r in series] for k in STACK], labels=STACK, step="post")
            ax.plot(t, [r["disk tier"] for r in series], "k--", lw=1, label="swap file (not local)")
        ax.set_title(name)
        ax.set_xlabel("replay time (s)")
        ax.set_ylabel("MiB")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(loc="upper left", fontsize=7)
    fig.suptitle("Local memory by instance state (USS) and the offload pool's RAM")
    fig.tight_layout()
    path = out / "memory.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _latency_plot(out: Path, summary: dict) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for name in summary["modes_run"]:
        lat = [
            r["latency_ms"]
            for r in read_jsonl(out / name / "invocations.jsonl")
            if r.get("status") == "success" and r.get("latency_ms") is not None
        ]
        if lat:
            xs, ys = cdf(lat)
            ax.step(xs, ys, where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("end-to-end latency (ms, log)")
    ax.set_ylabel("fraction of invocations")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path = out / "latency_cdf.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _cold_plot(out: Path, summary: dict) -> Path:
    names = summary["modes_run"]
    fig, ax = plt.subplots(figsize=(8, 4))
    values = [summary["modes"][n]["cold_starts"] for n in names]
    bars = ax.bar(names, values)
    for bar, n in zip(bars, names, strict=True):
        f = summary["modes"][n]["cold_start_fraction"]
        ax.annotate(
            f"{f:.0%}" if f is not None else "–",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel(f"cold starts (of {summary['invocations']} invocations)")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    path = out / "cold_starts.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def table(summary: dict) -> str:
    rows = []
    for name in summary["modes_run"]:
        m = summary["modes"][name]
        off = m["offloaded_mib"]
        rows.append(
            [
                name,
                fmt(m["warm_instances_mean"], 1),
                fmt(m["warm_instances_peak"], 0),
                fmt(m["instances_per_gib"], 2),
                fmt(m["cold_start_fraction"], 3),
                fmt(m["p50_ms"], 0),
                fmt(m["p95_ms"], 0),
                fmt(m["p99_ms"], 0),
                fmt(m["local_memory_mib"], 0),
                fmt(m["memory_time_gib_s"], 1),
                fmt(m["daemon_cpu_s"], 1),
                f"{fmt(off['zram']['peak_mib'], 0)} / {fmt(off['file']['peak_mib'], 0)}",
            ]
        )
    return markdown_table(
        [
            "mode",
            "warm held (mean)",
            "peak",
            "per GiB",
            "cold fraction",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "local MiB (mean)",
            "GiB·s",
            "daemon CPU s",
            "zram / file peak MiB",
        ],
        rows,
    )


def goals_table(summary: dict) -> str:
    return markdown_table(
        ["goal", "measured", "target", "verdict"],
        [
            [g["goal"], fmt(g["value"], 3), g["target"], {True: "met", False: "missed", None: "not measured"}[g["met"]]]
            for g in summary["goals"]
        ],
    )


def render(out: Path, summary: dict) -> list[Path]:
    files = [_memory_plot(out, summary), _latency_plot(out, summary), _cold_plot(out, summary)]
    text = [
        "# headline run",
        "",
        f"{summary['trace']}, the busiest hour (minutes {summary['window_start_min']}–"
        f"{summary['window_start_min'] + 60}) replayed in {summary['replay_s']:g} s (speed {summary['speed']:g}): "
        f"{summary['invocations']} invocations of {summary['trace_functions']} trace functions "
        f"({summary['actions_per_runtime']}), budget {summary['pool_memory']}, keep-alive "
        f"{summary['keep_alive_ms']} ms (10 trace minutes).",
        "",
        table(summary),
        "",
        goals_table(summary),
        "",
        *(f"![{f.stem}]({f.name})" for f in files),
        "",
    ]
    (out / "headline.md").write_text("\n".join(text))
    return [*files, out / "headline.md"]
