"""Tables and the Fig. 4.8-style plot of isolates-latency."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402
from .memory_render import COLORS  # noqa: E402


def latency_table(summary: dict) -> str:
    rows = []
    for mode, levels in summary["modes"].items():
        for n, e in sorted(levels.items(), key=lambda kv: int(kv[0])):
            lat, dur = e["latency_ms"], e["duration_ms"]
            rows.append(
                [
                    mode,
                    n,
                    str(e["count"]),
                    str(e["failures"]),
                    fmt(lat["p50"], 2),
                    fmt(lat["p90"], 2),
                    fmt(lat["p99"], 2),
                    fmt(lat["max"], 2),
                    fmt(dur["p50"], 2),
                    fmt(dur["p99"], 2),
                ]
            )
    return markdown_table(
        [
            "mode",
            "concurrency",
            "invocations",
            "failed",
            "p50 (ms)",
            "p90",
            "p99",
            "max",
            "duration p50",
            "duration p99",
        ],
        rows,
    )


def gains_table(summary: dict) -> str:
    rows = [[n, f"{g:+.1%}"] for n, g in sorted(summary["p99_isolate_vs_shared"].items(), key=lambda kv: int(kv[0]))]
    return markdown_table(["concurrency", "isolate p99 better than shared by"], rows)


def targets_table(summary: dict) -> str:
    rows = [
        [t["target"], fmt(t["value"], 3) + (f" (n={t['at']})" if "at" in t else ""), "met" if t["met"] else "missed"]
        for t in summary["targets"]
    ]
    return markdown_table(["target (issue 10)", "measured", ""], rows)


def plot(summary: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for mode, levels in summary["modes"].items():
        pts = sorted((int(n), e["latency_ms"]) for n, e in levels.items())
        ax.plot([n for n, _ in pts], [d["p99"] for _, d in pts], "o-", color=COLORS.get(mode), label=f"{mode} p99")
        ax.plot(
            [n for n, _ in pts],
            [d["p50"] for _, d in pts],
            "o--",
            color=COLORS.get(mode),
            alpha=0.6,
            label=f"{mode} p50",
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("latency (ms, client-side)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(f"{summary['function']}: latency per sharing mode (isolates thesis Fig. 4.8)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    files = []
    text = [
        "# Latency of the sharing modes (isolates thesis §4.3)",
        "",
        f"{summary['function']}, closed loop per concurrency level after a warm-up; client-side latency.",
        "",
        "## Latency",
        "",
        latency_table(summary),
        "",
        "## Isolate against shared (p99)",
        "",
        gains_table(summary),
        "",
    ]
    for key, title in (("isolate_start_ms", "idle node"), ("isolate_start_ms_loaded", "after the levels, loaded")):
        starts = summary.get(key)
        if starts:
            text += [
                f"## Isolate start times, {title} (the runtime's `sharing.isolates`)",
                "",
                markdown_table(
                    ["key", "value"],
                    [
                        [k, fmt(v, 3) if isinstance(v, float) else str(v)]
                        for k, v in sorted(starts.items())
                        if not k.endswith("samples_ms")
                    ],
                ),
                "",
            ]
    down = summary.get("teardown")
    if down:
        text += [
            "## Teardown",
            "",
            f"RSS reclaimed {fmt(down['rss_reclaimed_mb'])} MiB, an isolate holding {down.get('hold_mb')} MiB: "
            f"{fmt(down['rss_held_mb'])} MiB, after its teardown {fmt(down['rss_after_mb'])} MiB: "
            f"returned {fmt(down['returned'], 3)} of {fmt(down['held_mb'])} MiB held.",
            "",
        ]
    text += ["## Targets", "", targets_table(summary), ""]
    if summary["modes"]:
        png = plot(summary, out / "isolates_latency.png")
        files.append(png)
        text += [f"![latency]({png.name})", ""]
    (out / "isolates-latency.md").write_text("\n".join(text))
    return [out / "isolates-latency.md", *files]
