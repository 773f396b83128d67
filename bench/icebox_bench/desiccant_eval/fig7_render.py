"""Tables and the bar plot of desiccant-fig7 (the shape of Desiccant's Fig. 7)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..frozen_garbage.render import LANGUAGE_LABEL  # noqa: E402
from ..report.tables import fmt, markdown_table  # noqa: E402
from . import fig7  # noqa: E402

BARS = (
    ("vanilla_uss_mb", "vanilla"),
    ("eager_uss_mb", "eager GC"),
    ("desiccant_uss_mb", "desiccant"),
    ("ideal_uss_mb", "ideal"),
)


def _ordered(summary: dict) -> list[tuple[str, dict]]:
    return sorted(summary["functions"].items(), key=lambda kv: (kv[1]["language"], kv[0]))


def function_table(summary: dict) -> str:
    rows = []
    for name, f in _ordered(summary):
        r = fig7.ratios(f)
        rows.append(
            [
                name,
                LANGUAGE_LABEL.get(f["language"], f["language"]),
                *[fmt(f[k]) for k, _ in BARS],
                fmt(r["vanilla_over_desiccant"], 2),
                fmt(r["eager_over_desiccant"], 2),
                fmt(r["desiccant_over_ideal"], 2),
            ]
        )
    return markdown_table(
        [
            "function",
            "language",
            "vanilla (MiB)",
            "eager (MiB)",
            "desiccant (MiB)",
            "ideal (MiB)",
            "vanilla / desiccant",
            "eager / desiccant",
            "desiccant / ideal",
        ],
        rows,
    )


def language_table(summary: dict, details: dict | None = None) -> str:
    heap_only = fig7.heap_only_by_language(summary["functions"], (details or {}).get("functions") or {})
    rows = []
    counts: dict[str, int] = {}
    for f in summary["functions"].values():
        counts[f["language"]] = counts.get(f["language"], 0) + 1
    for language, g in summary["by_language"].items():
        paper = fig7.PAPER.get(language, {})
        cells = [LANGUAGE_LABEL.get(language, language), str(counts.get(language, 0))]
        for key in fig7.RATIOS:
            cells.append(fmt(g[key], 2) + (f" ({fmt(paper[key], 2)})" if key in paper else ""))
        cells.append(fmt(heap_only[language], 2) if language in heap_only else "")
        rows.append(cells)
    return markdown_table(
        [
            "language",
            "functions",
            "vanilla / desiccant (paper)",
            "eager / desiccant (paper)",
            "desiccant / ideal (paper)",
            "desiccant / heap-only ideal",
        ],
        rows,
    )


def targets_table(summary: dict) -> str:
    rows = [
        [
            LANGUAGE_LABEL.get(t["language"], t["language"]),
            t["target"],
            fmt(t["value"], 2),
            "met" if t["met"] else "missed",
        ]
        for t in fig7.targets(summary)
    ]
    return markdown_table(["language", "target (issue 4)", "measured", ""], rows)


def bar_plot(summary: dict, path: Path) -> Path:
    languages = list(summary["by_language"])
    groups = {lang: [(n, f) for n, f in _ordered(summary) if f["language"] == lang] for lang in languages}
    widths = [max(2, len(groups[lang])) for lang in languages]
    fig, axes = plt.subplots(
        1,
        len(languages),
        figsize=(max(6.0, 0.55 * sum(widths) + 2), 4.2),
        gridspec_kw={"width_ratios": widths},
        squeeze=False,
    )
    for ax, lang in zip(axes[0], languages, strict=True):
        items = groups[lang]
        xs = range(len(items))
        for i, (key, label) in enumerate(BARS):
            ax.bar([x + (i - 1.5) * 0.2 for x in xs], [f[key] for _, f in items], width=0.2, label=label)
        ax.set_xticks(list(xs), [n for n, _ in items], rotation=60, ha="right", fontsize="small")
        ax.set_title(LANGUAGE_LABEL.get(lang, lang), fontsize="medium")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0, 0].set_ylabel("USS after the last invocation, frozen (MiB)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize="small", frameon=False)
    fig.suptitle("Single instance memory after repeated executions (Desiccant Fig. 7)", fontsize="medium")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict, details: dict) -> list[Path]:
    if not summary["functions"]:
        return []
    plot = bar_plot(summary, out / "fig7_memory.png")
    failed = details.get("failed") or {}
    method = details.get("method", {})
    text = [
        "# Desiccant Fig. 7: memory after repeated executions, per mode",
        "",
        f"Per function, one instance per mode ran {method.get('iterations', '?')} invocations "
        f"(input {method.get('input', '?')}) and was frozen; USS then. Desiccant = the desiccant-mode "
        "instance after an explicit reclaim (the runtime's default variant). Ideal = start-up USS + the "
        "live heap beyond a bare runtime's; the heap-only ideal (the paper's reading) = the frozen vanilla "
        "instance less the heap it holds beyond its live objects. Per-language figures are means of the "
        "per-function ratios; the paper's in parentheses (Desiccant §5.2). See docs/bench.md.",
        "",
        "## Per language",
        "",
        language_table(summary, details),
        "",
        "## Targets",
        "",
        targets_table(summary),
        "",
        "## Per function",
        "",
        function_table(summary),
        "",
    ]
    if failed:
        text += ["## Not measured", ""] + [f"- {name}: {why}" for name, why in sorted(failed.items())] + [""]
    text += ["## Plot", "", f"![memory per mode]({plot.name})", ""]
    (out / "desiccant-fig7.md").write_text("\n".join(text))
    return [out / "desiccant-fig7.md", plot]
