"""squeezy-fig5's tables (beside the paper's figures) and its plot: unplug latency against VM
fullness, one panel per partition size, one line per series, log scale."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402

COLORS = {"squeezy": "#55a868", "virtio-mem": "#4c72b0", "virtio-mem-nozero": "#8172b3", "balloon": "#dd8452"}
LABELS = {"virtio-mem-nozero": "virtio-mem, no zeroing"}


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}x"


def latency_table(summary: dict, size: str) -> str:
    rows = []
    for series, by_size in summary["cells"].items():
        for fullness, c in (by_size.get(size) or {}).items():
            bad = ", ".join(f"{n} {o}" for o, n in c["not_released"].items() if n)
            rows.append(
                [
                    LABELS.get(series, series),
                    fullness,
                    fmt(c["unplug_ms"], 0),
                    fmt(c["drain_ms"], 0),
                    fmt(c["stop_ms"], 0),
                    fmt(c["pages_migrated"], 0),
                    str(c["n"]) + (f" ({bad})" if bad else ""),
                ]
            )
    return markdown_table(["series", "fullness", "unplug (ms)", "drain (ms)", "stop (ms)", "pages migrated", "n"], rows)


def ratio_table(summary: dict) -> str:
    rows = []
    for size, entry in summary["per_size"].items():
        r = entry["ratios"]
        rows.append(
            [
                size,
                *[
                    f"{_x(r[b]['mean'])} / {_x(r[b]['at_full'])}"
                    for b in ("virtio-mem", "balloon", "virtio-mem-nozero")
                ],
                "–" if entry["zeroing_share"] is None else f"{entry['zeroing_share']:.0%}",
            ]
        )
    o = summary["overall"]
    rows.append(
        [
            "**geomean**",
            *[f"{_x(o[b]['mean'])} / {_x(o[b]['at_full'])}" for b in ("virtio-mem", "balloon", "virtio-mem-nozero")],
            "",
        ]
    )
    return markdown_table(
        [
            "size (MiB)",
            "virtio-mem / squeezy (mean over fullness / full VM)",
            "balloon / squeezy",
            "virtio-mem no zeroing / squeezy",
            "zeroing share of virtio-mem's unplug",
        ],
        rows,
    )


def paper_table(summary: dict) -> str:
    p, cells = summary["paper"], summary["cells"]

    def full(series: str, size: int) -> float | None:
        by_f = (cells.get(series) or {}).get(str(size)) or {}
        return by_f[max(by_f, key=float)]["unplug_ms"] if by_f else None

    rows = [
        ["squeezy, 2 GiB (ms)", fmt(full("squeezy", 2048), 0), fmt(p["squeezy_2048_ms"], 0)],
        ["virtio-mem, 512 MiB (ms)", fmt(full("virtio-mem", 512), 0), fmt(p["virtio_mem_512_ms"], 0)],
        ["virtio-mem, 2 GiB (ms)", fmt(full("virtio-mem", 2048), 0), fmt(p["virtio_mem_2048_ms"], 0)],
        [
            "squeezy's speed-up (geomean, full VM: virtio-mem / balloon)",
            f"{_x(summary['overall']['virtio-mem']['at_full'])} / {_x(summary['overall']['balloon']['at_full'])}",
            _x(p["speedup_average"]),
        ],
    ]
    return markdown_table(["full VM", "icebox vm-shared", "Squeezy paper (KVM)"], rows)


def targets_table(summary: dict) -> str:
    rows = [
        [
            t["target"],
            fmt(t["value"], 2) if isinstance(t["value"], float) else str(t["value"]),
            str(t["paper"]),
            "met" if t["met"] else "missed",
        ]
        for t in summary["targets"]
    ]
    return markdown_table(["target", "measured", "paper", ""], rows)


def markdown(summary: dict) -> str:
    parts = ["# squeezy-fig5: taking an instance's memory back from an N:1 VM", ""]
    if summary.get("note"):
        parts += [f"*{summary['note']}*", ""]
    parts += [
        f"{summary['partitions']} partitions per VM; every instance filled {summary['fill']:.0%} of its "
        "partition; fullness = partitions in use when the target's partition was unplugged. "
        "Medians of released unplugs.",
        "",
    ]
    for size in summary["per_size"]:
        parts += [f"## {size} MiB partitions", "", latency_table(summary, size), ""]
    parts += [
        "## Ratios",
        "",
        ratio_table(summary),
        "",
        "## Beside the paper",
        "",
        paper_table(summary),
        "",
        f"Pages squeezy migrated in all its unplugs: {summary['squeezy_pages_migrated']}.",
        "",
        targets_table(summary),
        "",
    ]
    if summary.get("failed"):
        parts += ["## Failed", ""] + [f"- {k}: {v}" for k, v in summary["failed"].items()] + [""]
    return "\n".join(parts)


def plot(summary: dict, path: Path) -> Path:
    sizes = list(summary["per_size"])
    fig, axes = plt.subplots(1, max(len(sizes), 1), figsize=(5.0 * max(len(sizes), 1), 3.8), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=False):
        for series, by_size in summary["cells"].items():
            points = [
                (float(f), c["unplug_ms"]) for f, c in (by_size.get(size) or {}).items() if c["unplug_ms"] is not None
            ]
            if points:
                ax.plot(
                    *zip(*points, strict=True), marker="o", label=LABELS.get(series, series), color=COLORS.get(series)
                )
        ax.set_yscale("log")
        ax.set_xlabel("VM fullness (partitions in use)")
        ax.set_ylabel("unplug latency (ms)")
        ax.set_title(f"{size} MiB")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    md = out / "squeezy-fig5.md"
    md.write_text(markdown(summary))
    return [md, plot(summary, out / "squeezy_fig5.png")]
