"""Table and plot of desiccant-fig8 (the shape of Desiccant's Fig. 8)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402
from .fig8 import PAPER_ONE_INSTANCE_IMPROVEMENT  # noqa: E402


def table(summary: dict) -> str:
    rows = []
    for p in summary["points"]:
        v, d = p["vanilla"], p["desiccant"]
        rows.append(
            [
                str(p["instances"]),
                fmt(v["rss_mb"]),
                fmt(d["rss_mb"]),
                fmt(p["rss_improvement"], 2),
                fmt(v["pss_mb"]),
                fmt(d["pss_mb"]),
                fmt(p["pss_improvement"], 2),
                fmt(v["uss_mb"]),
                fmt(d["uss_mb"]),
            ]
        )
    return markdown_table(
        [
            "instances",
            "vanilla RSS",
            "desiccant RSS",
            "RSS improvement",
            "vanilla PSS",
            "desiccant PSS",
            "PSS improvement",
            "vanilla USS",
            "desiccant USS",
        ],
        rows,
    )


def plot(summary: dict, path: Path) -> Path:
    points = summary["points"]
    ks = [p["instances"] for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6))
    for mode, color in (("vanilla", "#d9534f"), ("desiccant", "#337ab7")):
        left.plot(ks, [p[mode]["rss_mb"] for p in points], marker="o", color=color, label=f"{mode} RSS")
        left.plot(ks, [p[mode]["pss_mb"] for p in points], marker="s", linestyle="--", color=color, label=f"{mode} PSS")
        left.plot(ks, [p[mode]["uss_mb"] for p in points], linestyle=":", color=color, label=f"{mode} USS")
    left.set_xlabel("concurrent instances")
    left.set_ylabel("memory per instance (MiB)")
    left.set_ylim(bottom=0)
    left.set_xticks(ks)
    left.legend(fontsize="small", ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
    left.grid(True, alpha=0.3)
    right.bar([k - 0.2 for k in ks], [p["rss_improvement"] for p in points], width=0.4, label="RSS")
    right.bar([k + 0.2 for k in ks], [p["pss_improvement"] for p in points], width=0.4, label="PSS")
    right.axhline(1.0, color="black", linewidth=0.8)
    right.set_xticks(ks)
    right.set_xlabel("concurrent instances")
    right.set_ylabel("vanilla / desiccant, per instance")
    right.legend(fontsize="small")
    right.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{summary['function']}: per-instance RSS and PSS (Desiccant Fig. 8)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    if not summary["points"]:
        return []
    png = plot(summary, out / "fig8_rss_pss.png")
    text = [
        f"# Desiccant Fig. 8: per-instance RSS and PSS of {summary['function']}",
        "",
        f"k instances, each after {summary['iterations']} invocations and frozen; desiccant: every instance "
        "of the set reclaimed (runtime default variant, library page-out included) with all k alive. "
        f"MiB per instance, mean over the k. The paper: {PAPER_ONE_INSTANCE_IMPROVEMENT}× for RSS and PSS "
        "with one instance; with more, RSS per instance stays and PSS approaches USS.",
        "",
        table(summary),
        "",
        f"![RSS and PSS]({png.name})",
        "",
    ]
    (out / "desiccant-fig8.md").write_text("\n".join(text))
    return [out / "desiccant-fig8.md", png]
