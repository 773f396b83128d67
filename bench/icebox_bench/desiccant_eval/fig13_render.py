"""Tables and plot of desiccant-fig13 (the shape of Desiccant's Fig. 13)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..frozen_garbage.render import LANGUAGE_LABEL  # noqa: E402
from ..report.tables import fmt, markdown_table, pct  # noqa: E402
from .fig13 import PAPER_MEAN_SLOWDOWN, TARGET_MEAN_SLOWDOWN  # noqa: E402


def _ordered(summary: dict) -> list[tuple[str, dict]]:
    return sorted(summary["functions"].items(), key=lambda kv: (kv[1]["language"], kv[0]))


def function_table(summary: dict) -> str:
    rows = []
    for name, f in _ordered(summary):
        for variant, v in f["variants"].items():
            label = variant + (" (default)" if variant == f.get("default_variant") else "")
            rows.append(
                [
                    name,
                    LANGUAGE_LABEL.get(f["language"], f["language"]),
                    label,
                    fmt(v["before_ms"]),
                    fmt(v["after_ms"]),
                    pct(v["slowdown"]),
                    pct(v.get("median_slowdown")),
                    fmt(v["first_after_ms"]),
                    pct(v["latency_slowdown"]),
                    fmt(v["freed_mb"]),
                    fmt(v["reclaim_cpu_ms"]),
                ]
            )
    return markdown_table(
        [
            "function",
            "language",
            "variant",
            "before (ms)",
            "after (ms)",
            "slowdown",
            "slowdown of medians",
            "1st after (ms)",
            "slowdown, client latency",
            "freed (MiB)",
            "reclaim CPU (ms)",
        ],
        rows,
    )


def language_table(summary: dict) -> str:
    rows = []
    for language, variants in summary["by_language"].items():
        for variant, g in variants.items():
            rows.append(
                [
                    LANGUAGE_LABEL.get(language, language),
                    variant,
                    str(g["functions"]),
                    pct(g["mean_slowdown"]),
                    pct(g["max_slowdown"]),
                ]
            )
    return markdown_table(["language", "variant", "functions", "mean slowdown", "max slowdown"], rows)


def plot(summary: dict, path: Path) -> Path:
    items = _ordered(summary)
    variants = sorted({v for _, f in items for v in f["variants"]})
    width = 0.8 / max(1, len(variants))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(items) + 2), 4.2))
    for i, variant in enumerate(variants):
        xs = [x for x, (_, f) in enumerate(items) if variant in f["variants"]]
        ys = [100.0 * f["variants"][variant]["slowdown"] for _, f in items if variant in f["variants"]]
        ax.bar([x - 0.4 + (i + 0.5) * width for x in xs], ys, width=width, label=variant)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.axhline(100.0 * TARGET_MEAN_SLOWDOWN, color="grey", linestyle="--", linewidth=0.8, label="target (mean)")
    ax.set_xticks(list(range(len(items))), [n for n, _ in items], rotation=60, ha="right", fontsize="small")
    ax.set_ylabel("execution time after / before − 1 (%)")
    ax.set_title("Slowdown of the invocations right after a reclaim (Desiccant Fig. 13)", fontsize="medium")
    ax.legend(fontsize="small", ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict, failed: dict) -> list[Path]:
    if not summary["functions"]:
        return []
    png = plot(summary, out / "fig13_slowdown.png")
    runs = summary["runs"]
    text = [
        "# Desiccant Fig. 13: execution time after a reclaim",
        "",
        f"Per function and variant: a fresh instance ran {runs['before']} invocations, was reclaimed, then ran "
        f"{runs['window']} more; before = mean execution time (the activation's duration) of the last "
        f"{runs['window']} before the reclaim, after = of the {runs['window']} after it. Every compared "
        "invocation started from a frozen instance.",
        "",
        f"Mean slowdown with each runtime's default variant: **{pct(summary['mean_slowdown_default'])}** "
        f"(paper: {pct(PAPER_MEAN_SLOWDOWN)}; target ≤ {pct(TARGET_MEAN_SLOWDOWN)}).",
        "",
        "## Per language and variant",
        "",
        language_table(summary),
        "",
        "## Per function",
        "",
        function_table(summary),
        "",
    ]
    if failed:
        text += ["## Not measured", ""] + [f"- {name}: {why}" for name, why in sorted(failed.items())] + [""]
    text += [f"![slowdown]({png.name})", ""]
    (out / "desiccant-fig13.md").write_text("\n".join(text))
    return [out / "desiccant-fig13.md", png]
