"""Tables and the plot of faasmem-fig12 (the shape of FaaSMem's Fig. 12)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.plots import _save as save_png  # noqa: E402
from ..report.tables import fmt, markdown_table, pct  # noqa: E402
from . import fig12  # noqa: E402
from .overheads_render import overheads_section  # noqa: E402

MODE_COLORS = {"none": "#999999", "tmo": "#f0a35e", "faasmem": "#337ab7"}


def _modes(load_runs: dict) -> list[str]:
    return [m for m in fig12.MODES if m in load_runs]


def load_table(load: str, summary: dict) -> str:
    load_runs = summary["runs"][load]
    comparison = summary["comparison"].get(load, {})
    modes = _modes(load_runs)
    rows = []
    for name, c in comparison.items():
        entries = {m: fig12._rows(load_runs[m]).get(name, {}) for m in modes}
        cells = [name]
        for m in modes:
            e = entries[m]
            cells.append(f"{fmt(e.get('local_mean_mib'))} ({fmt(c['local_normalised'].get(m), 2)})")
        for m in modes:
            e = entries[m]
            cells.append(f"{fmt(e.get('uss_mean_mib'))} ({fmt((c.get('uss_normalised') or {}).get(m), 2)})")
        for m in modes:
            cells.append(fmt((entries[m].get("latency_ms") or {}).get("p95")))
        for m in modes:
            cells.append(pct(entries[m].get("cold_start_share")))
        for m in modes:
            e = entries[m]
            cells.append(f"{fmt(e.get('offloaded_mib'))} / {fmt(e.get('refaulted_mib'))}")
        rows.append(cells)
    header = (
        ["function"]
        + [f"local MiB ({m}, ×none)" for m in modes]
        + [f"pool remote: USS MiB ({m}, ×none)" for m in modes]
        + [f"p95 ms ({m})" for m in modes]
        + [f"cold ({m})" for m in modes]
        + [f"offloaded / refaulted MiB ({m})" for m in modes]
    )
    return markdown_table(header, rows)


def targets_table(summary: dict) -> str:
    rows = []
    for t in summary.get("targets", []):
        value = ", ".join(f"{k} {fmt(v, 3) if isinstance(v, float) else v}" for k, v in t["value"].items())
        rows.append([t["load"], t["function"], t["target"], value, "met" if t["met"] else "missed"])
    if not rows:
        return "No targets could be checked."
    return markdown_table(["load", "function", "target", "measured", ""], rows)


def kernel_table(summary: dict) -> str:
    rows = []
    for load, load_runs in summary["runs"].items():
        for mode in _modes(load_runs):
            e = load_runs[mode]
            k = (e.get("overheads") or {}).get("kernel_swap") or {}
            n = e["node"]
            rows.append(
                [
                    load,
                    mode,
                    fmt(n.get("offloaded_mib")),
                    fmt(n.get("refaulted_mib")),
                    fmt(_mib(k.get("pswpout_bytes"))),
                    fmt(_mib(k.get("pswpin_bytes"))),
                    fmt(_mib(k.get("used_peak_bytes"))),
                    ", ".join(k.get("devices") or []) or "–",
                    fmt((n.get("pool") or {}).get("memory_bytes_mean")),
                ]
            )
    return markdown_table(
        [
            "load",
            "mode",
            "icebox offloaded (MiB)",
            "icebox refaulted (MiB)",
            "kernel pswpout (MiB)",
            "kernel pswpin (MiB)",
            "swap used, peak (MiB)",
            "swap devices",
            "pool RAM, mean (MiB)",
        ],
        rows,
    )


def _mib(value):
    return None if value is None else value / (1 << 20)


def fig12_plot(summary: dict, path: Path) -> Path:
    loads = [load for load in summary["runs"] if summary["runs"][load]]
    fig, axes = plt.subplots(len(loads), 1, figsize=(12, 3.6 * len(loads)), squeeze=False)
    for ax, load in zip(axes[:, 0], loads, strict=True):
        load_runs = summary["runs"][load]
        modes = _modes(load_runs)
        names = [n for n in summary["comparison"][load] if n != fig12.NODE]
        width = 0.8 / max(1, len(modes))
        twin = ax.twinx()
        for i, mode in enumerate(modes):
            xs = [x - 0.4 + (i + 0.5) * width for x in range(len(names))]
            norm = [summary["comparison"][load][n]["local_normalised"].get(mode) or 0.0 for n in names]
            ax.bar(xs, norm, width=width, color=MODE_COLORS.get(mode), label=f"{mode}: local memory")
            p95 = [(load_runs[mode]["functions"].get(n, {}).get("latency_ms") or {}).get("p95") for n in names]
            twin.plot(
                xs,
                [p if p is not None else float("nan") for p in p95],
                linestyle="none",
                marker="D",
                markersize=5,
                markeredgecolor="black",
                color=MODE_COLORS.get(mode),
                label=f"{mode}: p95",
            )
        ax.set_xticks(range(len(names)), names, rotation=25, ha="right", fontsize="small")
        ax.set_ylabel("local memory (× none)")
        ax.set_ylim(0, 1.3)
        ax.axhline(1.0 - fig12.TARGET_MEMORY_REDUCTION, color="#337ab7", linestyle=":", linewidth=1)
        twin.set_ylabel("p95 latency (ms, ◆)")
        twin.set_ylim(0, twin.get_ylim()[1] * 1.15)  # room above the highest marker
        ax.set_title(f"{load} load", fontsize="medium")
        ax.grid(True, axis="y", alpha=0.3)
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(handles, [h.get_label() for h in handles], fontsize="x-small", ncol=2, loc="upper right")
    fig.suptitle("Mean local memory normalised to no offloading, and p95 latency (FaaSMem Fig. 12)", fontsize="medium")
    return save_png(fig, path)


def render(out: Path, summary: dict) -> list[Path]:
    if not any(summary["runs"].values()):
        return []
    files = [fig12_plot(summary, out / "fig12.png")]
    c = summary["config"]
    text = [
        "# FaaSMem Fig. 12: local memory and p95 latency per offload mode",
        "",
        f"Trace {c['trace']} (window {c['trace_window']}) split by invocations into high and low load, "
        f"each load's trace functions mapped one to one onto {len(c['functions'])} benchmark functions "
        f"(mapping.json); replayed at speed ×{c['speed']:g}, keep-alive {c['keep_alive_s']:g} s, "
        f"then {c['tail_s']:g} s of tail measured. One iceboxd per run: {' '.join(c['daemon_args'])}.",
        "",
        "Local memory: the function's instances' `offload.local_bytes`, time-averaged over the run (MiB; "
        "×none in brackets): USS plus the zram pool's RAM for its swapped pages, this node's truth. "
        "Pool remote: USS alone, local memory as FaaSMem measured it with the pool in another machine. "
        "p95: client-side, every successful invocation, cold starts included. "
        "Offloaded / refaulted: what icebox moved (events or instance counters; the node row: Prometheus).",
        "",
    ]
    fallback = [
        f"{load}-{mode} ({e['fallback_rows']})"
        for load, r in summary["runs"].items()
        for mode, e in r.items()
        if e.get("fallback_rows")
    ]
    if fallback:
        text += ["Instance views without `offload.local_bytes` counted their USS in: " + ", ".join(fallback) + ".", ""]
    for load in summary["runs"]:
        if summary["runs"][load]:
            text += [f"## {load} load", "", load_table(load, summary), ""]
    text += [
        "## Targets",
        "",
        targets_table(summary),
        "",
        "## What icebox moved and what the kernel swapped",
        "",
        "The kernel's counters cover every swap device and every process: this machine's DAMON pages "
        "out memory cold for >= 60 s whenever swap exists, so they may exceed icebox's.",
        "",
        kernel_table(summary),
        "",
        overheads_section(
            {f"{load}-{mode}": e.get("overheads") or {} for load, r in summary["runs"].items() for mode, e in r.items()}
        ),
        "",
    ]
    if c.get("failed"):
        text += ["## Runs that failed", ""] + [f"- {k}: {v}" for k, v in sorted(c["failed"].items())] + [""]
    text += [f"![{f.stem}]({f.name})" for f in files] + [""]
    (out / "faasmem-fig12.md").write_text("\n".join(text))
    return [out / "faasmem-fig12.md", *files]
