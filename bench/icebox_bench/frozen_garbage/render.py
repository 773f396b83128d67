"""Tables and plots of the frozen-garbage recipe (the shape of Desiccant's Fig. 1 and 2)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402
from ..units import MIB  # noqa: E402
from .analysis import PAPER_MEAN_MAX_RATIO  # noqa: E402

LANGUAGE_LABEL = {"java": "Java", "nodejs": "JavaScript (Node.js)", "python": "Python"}


def _ordered(summary: dict) -> list[tuple[str, dict]]:
    return sorted(summary["functions"].items(), key=lambda kv: (kv[1]["language"], kv[0]))


def function_table(summary: dict, details: dict) -> str:
    rows = []
    for name, f in _ordered(summary):
        eager = ((details.get("functions", {}).get(name) or {}).get("eager") or {}).get("uss")
        rows.append(
            [
                name,
                LANGUAGE_LABEL.get(f["language"], f["language"]),
                str(len(f["uss_mb"])),
                fmt(f["uss_mb"][0]),
                fmt(f["uss_mb"][-1]),
                fmt(max(f["uss_mb"])),
                fmt(eager[-1] / MIB) if eager else "–",
                fmt(f["ideal_mb"][-1]),
                fmt(f["avg_ratio"], 2),
                fmt(f["max_ratio"], 2),
            ]
        )
    return markdown_table(
        [
            "function",
            "language",
            "iterations",
            "USS after 1st (MiB)",
            "USS after last (MiB)",
            "max USS (MiB)",
            "eager-GC USS after last (MiB)",
            "ideal after last (MiB)",
            "avg ratio",
            "max ratio",
        ],
        rows,
    )


def language_table(summary: dict) -> str:
    rows = []
    for language, g in summary["by_language"].items():
        paper = PAPER_MEAN_MAX_RATIO.get(language)
        rows.append(
            [
                LANGUAGE_LABEL.get(language, language),
                str(g["functions"]),
                fmt(g["avg_ratio"], 2),
                fmt(g["max_ratio"], 2),
                fmt(paper, 2) if paper else "not measured",
            ]
        )
    return markdown_table(
        ["language", "functions", "mean avg ratio", "mean max ratio", "paper's mean max ratio (Desiccant §3.1)"], rows
    )


def ratio_plot(summary: dict, path: Path) -> Path:
    items = _ordered(summary)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(items) + 2), 4.2))
    xs = range(len(items))
    ax.bar([x - 0.2 for x in xs], [f["avg_ratio"] for _, f in items], width=0.4, label="avg_ratio")
    ax.bar([x + 0.2 for x in xs], [f["max_ratio"] for _, f in items], width=0.4, label="max_ratio")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs), [name for name, _ in items], rotation=60, ha="right", fontsize="small")
    ax.set_ylabel("real / ideal memory (USS)")
    ax.set_title("Frozen garbage: ratio of real to ideal memory at function exit")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def curves_plot(summary: dict, details: dict, path: Path) -> Path:
    """Per function: real USS, eager-GC USS and ideal over the iterations (like Fig. 2).
    `details` is details.json: {"functions": {name: {...}}, "failed": {...}}."""
    items = _ordered(summary)
    cols = min(4, max(1, len(items)))
    rows = math.ceil(len(items) / cols) if items else 1
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.6 * rows), squeeze=False)
    for ax, (name, f) in zip(axes.flat, items, strict=False):
        xs = range(1, len(f["uss_mb"]) + 1)
        ax.plot(xs, f["uss_mb"], label="real (vanilla)")
        eager = (details.get("functions", {}).get(name) or {}).get("eager", {}).get("uss")
        if eager:
            ax.plot(xs, [v / MIB for v in eager], label="eager GC", linestyle="--")
        ax.plot(xs, f["ideal_mb"], label="ideal", linestyle=":")
        ax.set_title(name, fontsize="small")
        ax.tick_params(labelsize="x-small")
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[len(items) :]:
        ax.axis("off")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=3, fontsize="small")
    fig.supxlabel("invocation", fontsize="small")
    fig.supylabel("USS (MiB)", fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict, details: dict) -> list[Path]:
    if not summary["functions"]:
        return []
    files = [ratio_plot(summary, out / "ratios.png"), curves_plot(summary, details, out / "memory_curves.png")]
    failed = details.get("failed") or {}
    text = [
        "# Frozen garbage (Desiccant §3.1, Fig. 1 and 2)",
        "",
        "Real = the instance's USS right after each invocation exits. Ideal = its USS right after "
        "start-up (`runtime_ready`) + the live bytes of its heap after a full collection at that exit "
        "(measured in a second instance running the same sequence) − the live bytes of a bare runtime, "
        "which the start-up USS already holds. Eager GC = the second instance's USS after that "
        "collection (Desiccant's eager baseline). See docs/bench.md.",
        "",
        "## Per language",
        "",
        language_table(summary),
        "",
        "## Per function",
        "",
        function_table(summary, details),
        "",
    ]
    if failed:
        text += ["## Not measured", ""] + [f"- {name}: {why}" for name, why in sorted(failed.items())] + [""]
    text += ["## Plots", "", "![ratios](ratios.png)", "", "![memory curves](memory_curves.png)", ""]
    (out / "frozen-garbage.md").write_text("\n".join(text))
    return [out / "frozen-garbage.md", *files]
