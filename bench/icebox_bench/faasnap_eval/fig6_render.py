"""faasnap-fig6's tables (markdown, beside the paper's figures) and a Fig. 6-style plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402

COLORS = {"lazy": "#4c72b0", "reap": "#dd8452", "faasnap": "#55a868", "cached": "#c4ad3a"}


def _x(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}x"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def panel_table(summary: dict, panel: str) -> str:
    p = summary["panels"][panel]
    modes = summary["modes"]
    rows = []
    for fn, f in p["functions"].items():
        cells = [fmt(f["modes"][m]["median_ms"], 0) + ("" if f["modes"][m]["n"] else " (none)") for m in modes]
        r = f["ratios"]
        rows.append(
            [
                fn,
                *cells,
                _x(r["faasnap_vs_lazy"]),
                _x(r["faasnap_vs_reap"]),
                _x(r["faasnap_vs_cached"], 3),
                fmt(r["cold_cache_cost_ms"], 0),
                _pct(r["gap_closed"]),
            ]
        )
    o = p["overall"]
    rows.append(
        [
            "**geomean**",
            *["" for _ in modes],
            _x(o["faasnap_vs_lazy"]),
            _x(o["faasnap_vs_reap"]),
            _x(o["faasnap_vs_cached"], 3),
            "",
            _pct(o["gap_closed_median"]) + " (median)",
        ]
    )
    header = [
        "function",
        *[f"{m} (ms)" for m in modes],
        "faasnap vs lazy",
        "faasnap vs reap",
        "faasnap / cached",
        "lazy − cached (ms)",
        "of it saved by faasnap",
    ]
    return markdown_table(header, rows)


def paging_table(summary: dict, panel: str) -> str:
    """FaaSnap's Fig. 9 view: what the restored VM's QEMU itself had to read."""
    p = summary["panels"][panel]
    modes = summary["modes"]
    rows = []
    for fn, f in p["functions"].items():
        rows.append(
            [fn, *[f"{fmt(f['modes'][m].get('majflt'), 0)} / {fmt(f['modes'][m].get('read_mib'), 1)}" for m in modes]]
        )
    return markdown_table(["function", *[f"{m}: major faults / MiB read" for m in modes]], rows)


def steps_table(summary: dict) -> str:
    rows = []
    for mode, e in (summary.get("restore_steps") or {}).items():
        rows.append(
            [
                mode,
                *[fmt(e[k], 0) for k in ("incoming", "prefetch_wait", "resume", "attach", "total")],
                fmt(e["reseed"], 0),
                fmt(e["daemon_restore"], 0),
                fmt(e["loader_mib"], 0),
                fmt(e["loader_ms"], 0),
                fmt(e["cached_mib_at_ready"], 0),
                str(e["n"]),
            ]
        )
    return markdown_table(
        [
            "mode",
            "QEMU + state (ms)",
            "wait for loader",
            "cont → agent",
            "attach",
            "backend total",
            "reseed",
            "daemon restore",
            "loader MiB",
            "loader ms",
            "file MiB cached at ready",
            "n",
        ],
        rows,
    )


def overall_table(summary: dict) -> str:
    o, paper = summary["overall"], summary["paper"]
    rows = [
        ["faasnap vs lazy (speed-up)", _x(o["faasnap_vs_lazy"]), _x(paper["faasnap_vs_lazy"], 1)],
        ["faasnap vs reap (speed-up)", _x(o["faasnap_vs_reap"]), _x(paper["faasnap_vs_reap"], 1)],
        ["faasnap / cached (time)", _x(o["faasnap_vs_cached"], 3), _x(paper["faasnap_vs_cached"], 3)],
        ["share of lazy's cold-cache cost faasnap saves (median)", _pct(o.get("gap_closed_median")), "–"],
    ]
    return markdown_table(["geomean over functions and panels", "icebox vm", "FaaSnap paper"], rows)


def targets_table(summary: dict) -> str:
    rows = [
        [t["target"], _x(t["value"], 3), _x(t["paper"], 3), "met" if t["met"] else "missed"] for t in summary["targets"]
    ]
    return markdown_table(["target", "measured", "paper", ""], rows)


def markdown(summary: dict) -> str:
    parts = ["# faasnap-fig6: cold invocations served by VM snapshot restores", ""]
    if summary.get("note"):
        parts += [f"*{summary['note']}*", ""]
    for panel in summary["panels"]:
        parts += [
            f"## Panel {panel} (loading set recorded with input {panel[0]}, tested with input {panel[-1]})",
            "",
            "Median end-to-end time of the invocation, client side.",
            "",
            panel_table(summary, panel),
            "",
            "QEMU's own paging during the restore and the invocation (medians; the loader's reads are "
            "the daemon's, not QEMU's):",
            "",
            paging_table(summary, panel),
            "",
        ]
    parts += [
        "## Restore steps (medians over all functions and panels)",
        "",
        steps_table(summary),
        "",
        "## Overall",
        "",
        overall_table(summary),
        "",
        targets_table(summary),
        "",
    ]
    if summary.get("failed"):
        parts += ["## Failed", ""] + [f"- {k}: {v}" for k, v in summary["failed"].items()] + [""]
    return "\n".join(parts)


def plot(summary: dict, path: Path) -> Path:
    panels = list(summary["panels"])
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.0), squeeze=False)
    modes = summary["modes"]
    width = 0.8 / max(len(modes), 1)
    for ax, panel in zip(axes[0], panels, strict=True):
        fns = list(summary["panels"][panel]["functions"])
        for i, mode in enumerate(modes):
            ys = [(summary["panels"][panel]["functions"][fn]["modes"][mode]["median_ms"] or 0) / 1000.0 for fn in fns]
            ax.bar([x + i * width for x in range(len(fns))], ys, width, label=mode, color=COLORS.get(mode))
        ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(fns))])
        ax.set_xticklabels(fns, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("invocation time (s)")
        ax.set_title(f"record {panel[0]}, test {panel[-1]}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    md = out / "faasnap-fig6.md"
    md.write_text(markdown(summary))
    return [md, plot(summary, out / "faasnap_fig6.png")]
