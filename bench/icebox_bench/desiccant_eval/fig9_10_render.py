"""Tables and plots of desiccant-fig9-10 (the shapes of Desiccant's Fig. 9 and 10)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table, pct  # noqa: E402
from . import fig9_10  # noqa: E402

MODE_COLORS = {"vanilla": "#d9534f", "eager": "#f0a35e", "desiccant": "#337ab7"}


def _scales(summary: dict) -> list[str]:
    keys = {k for runs in summary["runs"].values() for k in runs}
    return sorted(keys, key=float)


def runs_table(summary: dict) -> str:
    rows = []
    for scale in _scales(summary):
        for mode, runs in summary["runs"].items():
            r = runs.get(scale)
            if r is None:
                continue
            cpu = r.get("cpu") or {}
            lat = r["latency_ms"]
            rows.append(
                [
                    f"×{scale}",
                    mode,
                    fmt(r["invocations"]),
                    pct(r["cold_start_rate"]),
                    fmt(r["throughput_per_s"], 2),
                    fmt(lat.get("p50")),
                    fmt(lat.get("p90")),
                    fmt(lat.get("p95")),
                    fmt(lat.get("p99")),
                    fmt(cpu.get("cores"), 2),
                    fmt(cpu.get("daemon_s")),
                    fmt(cpu.get("instances_s")),
                    fmt(r["evictions"].get("memory_budget", 0)),
                    fmt(r["reclaims"]),
                    fmt(r["reclaimed_mib"]),
                    fmt(r["memory_mean_mib"]),
                ]
            )
    return markdown_table(
        [
            "scale",
            "mode",
            "invocations",
            "cold starts",
            "throughput (/s)",
            "p50 (ms)",
            "p90 (ms)",
            "p95 (ms)",
            "p99 (ms)",
            "CPU (cores)",
            "daemon CPU (s)",
            "instances CPU (s)",
            "budget evictions",
            "reclaims",
            "reclaimed (MiB)",
            "mean USS (MiB)",
        ],
        rows,
    )


def comparison_table(summary: dict) -> str:
    rows = []
    for scale, c in sorted(summary["comparison"].items(), key=lambda kv: float(kv[0])):
        for baseline in ("vanilla", "eager"):
            v = c.get(f"vs_{baseline}")
            if v is None:
                continue
            li = v["latency_improvement"]
            rows.append(
                [
                    f"×{scale}",
                    baseline,
                    "yes" if c.get("vanilla_memory_bound") else "no",
                    fmt(v["cold_start_reduction"], 2) if v["cold_start_reduction"] is not None else "∞ / –",
                    pct(v["throughput_gain"]),
                    pct(li.get("p90")),
                    pct(li.get("p95")),
                    pct(li.get("p99")),
                    fmt(v["cpu_ratio"], 2),
                ]
            )
    return markdown_table(
        [
            "scale",
            "desiccant vs",
            "vanilla memory-bound",
            "cold-start reduction (×)",
            "throughput gain",
            "p90 better by",
            "p95 better by",
            "p99 better by",
            "CPU ratio",
        ],
        rows,
    )


def targets_table(summary: dict) -> str:
    rows = [
        [f"×{t['scale']}", t["target"], fmt(t["value"], 3), "met" if t["met"] else "missed"]
        for t in summary.get("targets", [])
    ]
    return (
        markdown_table(["scale", "target (issue 4)", "measured", ""], rows)
        if rows
        else "No scale where vanilla was memory-bound (no budget eviction): the targets do not apply."
    )


def fig9_plot(summary: dict, path: Path) -> Path:
    scales = _scales(summary)
    panels = (
        ("cold-start rate (%)", lambda r: 100.0 * (r["cold_start_rate"] or 0.0)),
        ("throughput (invocations/s)", lambda r: r["throughput_per_s"] or 0.0),
        ("CPU, daemon + instances (cores)", lambda r: (r.get("cpu") or {}).get("cores") or 0.0),
    )
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (label, get) in zip(axes, panels, strict=True):
        for mode, runs in summary["runs"].items():
            xs = [float(s) for s in scales if s in runs]
            ax.plot(
                xs, [get(runs[s]) for s in scales if s in runs], marker="o", label=mode, color=MODE_COLORS.get(mode)
            )
        ax.set_xlabel("scale factor")
        ax.set_title(label, fontsize="medium")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle("Azure trace replay under a memory budget (Desiccant Fig. 9)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def fig10_plot(summary: dict, path: Path) -> Path:
    scales = _scales(summary)
    modes = list(summary["runs"])
    fig, axes = plt.subplots(1, len(scales), figsize=(4.2 * len(scales), 3.8), squeeze=False)
    for ax, scale in zip(axes[0], scales, strict=True):
        width = 0.8 / max(1, len(modes))
        for i, mode in enumerate(modes):
            r = summary["runs"][mode].get(scale)
            if r is None:
                continue
            ys = [r["latency_ms"].get(p) or 0.0 for p in fig9_10.PERCENTILES]
            ax.bar(
                [x - 0.4 + (i + 0.5) * width for x in range(3)],
                ys,
                width=width,
                label=mode,
                color=MODE_COLORS.get(mode),
            )
        ax.set_xticks(range(3), list(fig9_10.PERCENTILES))
        ax.set_title(f"scale ×{scale}", fontsize="medium")
        ax.set_ylabel("latency (ms)")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize="small")
    fig.suptitle("Tail latency (Desiccant Fig. 10)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    if not any(summary["runs"].values()):
        return []
    files = [fig9_plot(summary, out / "fig9.png"), fig10_plot(summary, out / "fig10.png")]
    c = summary["config"]
    warmup = f"×{c['warmup_scale']:g}" if c.get("warmup_scale") else "the run's scale"
    text = [
        "# Desiccant Fig. 9 and 10: Azure trace replay under a memory budget",
        "",
        f"Trace {c['trace']} from trace minute {c['window_start_s'] / 60:g}, functions paired by duration "
        f"({len(c['mapping'])} pairs); warm-up {c['warmup_s']:g} s at {warmup} (excluded), then "
        f"{c['duration_s']:g} s measured per run; {c['memory_mb']} MB limit per instance; keep-alive pool "
        f"budget {c['pool_memory']} ({c['pool_memory_rule']}). One fresh iceboxd per run. CPU: "
        f"{c.get('cpu_method', '?')} (daemon + all its instances).",
        "",
        "## Runs",
        "",
        runs_table(summary),
        "",
        "## Desiccant against the baselines",
        "",
        comparison_table(summary),
        "",
        "## Targets",
        "",
        targets_table(summary),
        "",
    ]
    if c.get("failed"):
        text += ["## Runs that failed", ""] + [f"- {k}: {v}" for k, v in sorted(c["failed"].items())] + [""]
    text += [
        "Side-by-side report of every run (latency CDFs, memory timelines): [report/report.md](report/report.md)",
        "",
        *[f"![{f.stem}]({f.name})" for f in files],
        "",
    ]
    (out / "desiccant-fig9-10.md").write_text("\n".join(text))
    return [out / "desiccant-fig9-10.md", *files]
