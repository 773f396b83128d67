"""Table and timeline plot of faasmem-semiwarm."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.plots import _save as save_png  # noqa: E402
from ..report.tables import fmt, markdown_table  # noqa: E402
from .overheads_render import overheads_section  # noqa: E402

COLORS = ("#337ab7", "#999999", "#f0a35e", "#5cb85c")


def periods_table(summary: dict) -> str:
    rows = []
    for name, v in summary["variants"].items():
        for i, p in enumerate(v["periods"]):
            w = p["wake"]
            rows.append(
                [
                    name,
                    str(i + 1),
                    fmt(p["idle_s"]),
                    fmt(p["local_after_burst_mib"]),
                    fmt(p["local_mean_mib"]),
                    fmt(p["local_min_mib"]),
                    fmt(p["local_before_wake_mib"]),
                    fmt(p["semiwarm_after_s"]),
                    fmt(p["offloaded_idle_mib"]),
                    fmt(w["latency_ms"]),
                    w.get("start_kind") or "–",
                    fmt(w["refaulted_mib"]),
                    fmt(v["burst_warm_latency_ms"]["p50"]),
                ]
            )
    return markdown_table(
        [
            "--semiwarm",
            "idle period",
            "idle (s)",
            "local after burst (MiB)",
            "local mean (MiB)",
            "local min (MiB)",
            "local before wake (MiB)",
            "semi-warm after (s)",
            "offloaded while idle (MiB)",
            "wake latency (ms)",
            "wake start",
            "refaulted at wake (MiB)",
            "burst warm p50 (ms)",
        ],
        rows,
    )


def timeline_plot(summary: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4.2))
    for color, (name, v) in zip(COLORS * 4, summary["variants"].items(), strict=False):
        ts = [p[0] for p in v["timeline"]]
        ax.step(ts, [p[1] or 0.0 for p in v["timeline"]], where="post", color=color, label=f"--semiwarm {name}")
        on = [p[0] for p in v["timeline"] if p[2]]
        if on:
            ax.scatter(on, [0.0] * len(on), marker="|", color=color, s=30)
        for wake in v["wakes"]:
            ax.axvline(wake["offset_s"], color=color, linestyle=":", linewidth=1)
    ax.set_xlabel("time since the first request (s); dotted: wake requests; ticks at 0: semi-warm")
    ax.set_ylabel("local memory (MiB)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(f"{summary['config']['function']}: local memory through keep-alive", fontsize="medium")
    return save_png(fig, path)


def render(out: Path, summary: dict) -> list[Path]:
    if not summary["variants"]:
        return []
    c = summary["config"]
    files = [timeline_plot(summary, out / "semiwarm_timeline.png")]
    text = [
        "# FaaSMem semi-warm: local memory through keep-alive",
        "",
        f"{c['function']}: {c['cycles']} × ({c['burst']} requests {c['gap_s']:g} s apart, then {c['idle_s']:g} s "
        f"idle), then one wake request; keep-alive {c['keep_alive_s']:g} s. One iceboxd per variant: "
        f"{' '.join(c['daemon_args'])}.",
        "",
        periods_table(summary),
        "",
    ]
    for name, cmp in summary["comparison"].items():
        for i, (memory, latency) in enumerate(
            zip(cmp["idle_local_mean_ratio"], cmp["wake_latency_ratio"], strict=True)
        ):
            text.append(
                f"- --semiwarm {name} against off, idle period {i + 1}: mean local memory "
                f"×{fmt(memory, 2)}, wake request latency ×{fmt(latency, 2)}"
            )
    text += ["", overheads_section({name: v["overheads"] for name, v in summary["variants"].items()}), ""]
    if c.get("failed"):
        text += ["## Runs that failed", ""] + [f"- {k}: {v}" for k, v in sorted(c["failed"].items())] + [""]
    text += [f"![{f.stem}]({f.name})" for f in files] + [""]
    (out / "faasmem-semiwarm.md").write_text("\n".join(text))
    return [out / "faasmem-semiwarm.md", *files]
