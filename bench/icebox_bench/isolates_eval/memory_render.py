"""Tables and the Fig. 4.1–4.4-style plot of isolates-memory."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402
from . import fit as fitting  # noqa: E402
from .memory import peaks  # noqa: E402

COLORS = {"process": "tab:gray", "shared": "tab:blue", "isolate": "tab:orange"}


def fit_table(summary: dict) -> str:
    rows = []
    for name, f in sorted(summary["functions"].items()):
        for mode in fitting.MODES:
            e = f["modes"].get(mode)
            if e is None:
                continue
            fit = e["fit"]
            rows.append(
                [
                    name,
                    mode,
                    fmt(fit["base_mb"]),
                    fmt(fit["base0_mb"]),
                    str(fit["increment_mb"]),
                    fmt(fit["slope_mb"], 2),
                    " / ".join(fmt(p) for _, p in sorted(peaks(e["points"]).items())),
                ]
            )
    levels = "/".join(str(n) for n in summary["levels"])
    return markdown_table(
        [
            "function",
            "mode",
            "base (MiB, n=1)",
            "base0 (MiB, n=0)",
            "increment (MiB)",
            "slope",
            f"peak at n={levels} (MiB)",
        ],
        rows,
    )


def comparison_table(summary: dict) -> str:
    rows = []
    for name, f in sorted(summary["functions"].items()):
        r = f.get("isolate_over_process_at_8") or {}
        c = f.get("crossover") or {}
        rows.append(
            [
                name,
                fmt(r.get("measured"), 3),
                fmt(r.get("fitted"), 3),
                str(c.get("fitted", "")) if c.get("fitted") is not None else "none ≤ 64",
                str(c.get("measured")) if c.get("measured") is not None else "none measured",
            ]
        )
    return markdown_table(
        ["function", "isolate/process at n=8 (measured)", "(fitted)", "crossover n (fitted)", "crossover n (measured)"],
        rows,
    )


def targets_table(summary: dict) -> str:
    rows = [
        [t["function"], t["target"], fmt(t["value"], 3), "met" if t["met"] else "missed"] for t in summary["targets"]
    ]
    return markdown_table(["function", "target (issue 10)", "measured", ""], rows)


def plot(summary: dict, path: Path) -> Path:
    names = sorted(summary["functions"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.0 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for mode, e in summary["functions"][name]["modes"].items():
            pts = sorted(peaks(e["points"]).items())
            ns = [n for n, _ in pts]
            ax.plot(ns, [v for _, v in pts], "o-", color=COLORS.get(mode), label=f"{mode} (measured)")
            f = fitting.Fit.from_json(e["fit"])
            ax.plot(ns, [f.limit(n) for n in ns], "--", color=COLORS.get(mode), alpha=0.7, label=f"{mode} (fit)")
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel("concurrent activations n")
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel(f"action memory, {summary['measure'].upper()} peak (MiB)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize="small", frameon=False)
    fig.suptitle("Memory per concurrency level and sharing mode (isolates thesis Figs. 4.1–4.4)", fontsize="medium")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(out: Path, summary: dict, failed: dict | None = None) -> list[Path]:
    if not summary["functions"]:
        return []
    png = plot(summary, out / "isolates_memory.png")
    text = [
        "# Memory of the sharing modes (isolates thesis §4.1, Table 4.1)",
        "",
        f"Per function and mode, n activations held in flight (closed loop) and the action's total "
        f"{summary['measure'].upper()} sampled; the peak per level is fitted as the thesis does: increment = "
        "ceil(least-squares slope), base = the largest intercept keeping the line above every point "
        "(base at n=1 as the thesis' Base; base0 = base − increment, icebox-policy's MemoryProfile base).",
        "",
        "## Fits",
        "",
        fit_table(summary),
        "",
        "## Isolate against process and shared",
        "",
        comparison_table(summary),
        "",
        "## Targets",
        "",
        targets_table(summary),
        "",
    ]
    if failed:
        text += ["## Not measured", ""] + [f"- {k}: {v}" for k, v in sorted(failed.items())] + [""]
    text += [f"![memory per level]({png.name})", ""]
    (out / "isolates-memory.md").write_text("\n".join(text))
    return [out / "isolates-memory.md", png]
