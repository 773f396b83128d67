"""squeezy-fig10's tables and its plot: Fig. 10 (left) — each function's p99 under memory
pressure normalised to its abundant p99, per memory mode — and the GiB-s partitions held."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402

COLORS = {"squeezy": "#55a868", "virtio-mem": "#4c72b0", "balloon": "#dd8452"}


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def latency_table(summary: dict) -> str:
    rows = []
    for key, run in summary["runs"].items():
        for fn, e in run["functions"].items():
            bad = ", ".join(f"{n} {st}" for st, n in e["statuses"].items() if st not in ("success",))
            rows.append(
                [
                    key,
                    fn,
                    str(e["n"]),
                    fmt(e["p50_ms"], 0),
                    fmt(e["p99_ms"], 0),
                    f"{e['cold']} / {e['warm']}",
                    bad or "–",
                ]
            )
    return markdown_table(
        ["mode/scenario", "function", "served", "p50 (ms)", "p99 (ms)", "cold / warm", "other statuses"], rows
    )


def ratio_table(summary: dict) -> str:
    rows = []
    for mode, r in summary["ratios"].items():
        rows.append(
            [
                mode,
                *[_x(r["by_function"].get(fn)) for fn in summary["functions"]],
                _x(r["p99_ratio_mean"]),
                _x((summary["paper"]["p99_ratio"]).get(mode)),
                _x(r["gib_s_ratio"]),
            ]
        )
    return markdown_table(["mode", *summary["functions"], "mean", "paper", "GiB-s pressure / abundant"], rows)


def memory_table(summary: dict) -> str:
    rows = []
    for key, run in summary["runs"].items():
        m = run["memory"]
        budget = run.get("vm_memory_bytes")
        rows.append(
            [
                key,
                "–" if not budget else f"{budget / 2**20:.0f}",
                fmt(m["gib_s"], 1),
                fmt(m["peak_gib"], 2),
                f"{m['plugs']} ({m['plugs_waited']} waited, {m['vm_boots']} VM boots)",
                fmt(m["plug_wait_ms_p99"], 0),
                f"{m['reclaims']} ({m['reclaims_stuck']} stuck)",
                fmt(m["unplug_ms_median"], 0),
                str(m["pages_migrated"]),
                str(run["all"]["timeouts"]),
                m["source"],
            ]
        )
    return markdown_table(
        [
            "mode/scenario",
            "--vm-memory (MiB)",
            "GiB-s",
            "peak GiB",
            "plugs",
            "plug wait p99 (ms)",
            "reclaims",
            "unplug median (ms)",
            "pages migrated",
            "timeouts",
            "memory from",
        ],
        rows,
    )


def targets_table(summary: dict) -> str:
    rows = [
        [
            t["target"],
            fmt(t["value"], 2) if isinstance(t["value"], float) else str(t["value"]),
            "–" if t["paper"] is None else fmt(t["paper"], 2),
            "met" if t["met"] else "missed",
        ]
        for t in summary["targets"]
    ]
    return markdown_table(["target", "measured", "paper", ""], rows)


def markdown(summary: dict) -> str:
    c = summary.get("config") or {}
    parts = ["# squeezy-fig10: tail latency with limited memory for N:1 VMs", ""]
    if summary.get("note"):
        parts += [f"*{summary['note']}*", ""]
    parts += [
        f"Trace {c.get('trace')} minutes {c.get('start_minute')}+{c.get('minutes')} at ×{c.get('scale')} "
        f"({c.get('scheduled')} invocations); {c.get('partitions')} partitions per VM, "
        f"{c.get('memory_mb')} MiB per instance, keep-alive {c.get('keep_alive')}; pressure budget "
        f"{c.get('pressure_fraction')} of the abundant run's peak.",
        "",
        "## p99 under pressure over abundant (Fig. 10, left)",
        "",
        ratio_table(summary),
        "",
        "## Latency per run",
        "",
        latency_table(summary),
        "",
        "## Partition memory",
        "",
        memory_table(summary),
        "",
    ]
    saving = summary.get("gib_s_saving_vs_virtio_mem")
    parts += [
        f"GiB-s squeezy saves over virtio-mem under pressure: "
        f"{'–' if saving is None else f'{saving:.0%}'} (paper: "
        f"{summary['paper']['gib_s_saving_vs_virtio_mem']:.1%}).",
        "",
        targets_table(summary),
        "",
    ]
    errors = {
        f"{key} {fn}: {msg}": n
        for key, run in summary["runs"].items()
        for fn, e in run["functions"].items()
        for msg, n in (e.get("errors") or {}).items()
    }
    if errors:
        parts += ["## Invocations not served", ""] + [f"- {k}… ({n}×)" for k, n in errors.items()] + [""]
    if summary.get("failed"):
        parts += ["## Failed", ""] + [f"- {k}: {v}" for k, v in summary["failed"].items()] + [""]
    return "\n".join(parts)


def plot(summary: dict, path: Path) -> Path:
    fns, modes = summary["functions"], list(summary["ratios"])
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(fns) + 2), 3.6))
    width = 0.8 / max(len(modes), 1)
    for i, mode in enumerate(modes):
        ys = [summary["ratios"][mode]["by_function"].get(fn) or 0 for fn in fns]
        ax.bar([x + i * width for x in range(len(fns))], ys, width, label=mode, color=COLORS.get(mode))
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(fns))])
    ax.set_xticklabels(fns, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("p99 pressure / p99 abundant")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    md = out / "squeezy-fig10.md"
    md.write_text(markdown(summary))
    return [md, plot(summary, out / "squeezy_fig10.png")]
