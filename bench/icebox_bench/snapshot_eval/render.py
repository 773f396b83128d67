"""snapshot-restore's tables (snapshot-restore.md) and plot (snapshot_restore.png)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..report.tables import fmt, markdown_table  # noqa: E402

COLORS = {"eager": "#7f7f7f", "lazy": "#d62728", "reap": "#ff7f0e", "faasnap": "#2ca02c", "start": "#1f77b4"}


def _x(value, suffix: str = "×") -> str:
    return "–" if value is None else f"{value:.2f}{suffix}"


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def _order(cells: dict) -> list[tuple[str, str]]:
    keys = [(m, v) for m, by_v in cells.items() for v in by_v]
    rank = {m: i for i, m in enumerate(["eager", "lazy", "reap", "faasnap", "start"])}
    return sorted(keys, key=lambda k: (rank.get(k[0], 9), k[1] != "cold", k[1]))


def times_table(summary: dict) -> str:
    rows = []
    for name, f in summary["functions"].items():
        for mode, variant in _order(f["cells"]):
            c = f["cells"][mode][variant]
            pager = c.get("pager") or {}
            rows.append(
                [
                    name,
                    mode,
                    variant,
                    str(c["n"]),
                    fmt(c["latency_ms"]["p50"]),
                    fmt(c["latency_ms"]["min"]),
                    fmt(c["latency_ms"]["max"]),
                    fmt(c["restore_ms"], 0),
                    fmt(c["criu_ms"], 0),
                    fmt(c["duration_ms"], 0),
                    _pct(c["resident"]),
                    fmt(c["uss_mib"]),
                    fmt(c["pss_mib"]),
                    fmt(pager.get("faults"), 0),
                    fmt(pager.get("loader_pages"), 0),
                    fmt(None if pager.get("bytes_read") is None else pager["bytes_read"] / 2**20),
                ]
            )
    return markdown_table(
        [
            "function",
            "mode",
            "page cache",
            "n",
            "cold start p50 (ms, client)",
            "min",
            "max",
            "initTime p50 (restore; /init for start)",
            "criu",
            "/run duration",
            "snapshot cached before",
            "USS MiB",
            "PSS MiB",
            "pager faults",
            "loader pages",
            "MiB read by the pager",
        ],
        rows,
    )


def ratios_table(summary: dict) -> str:
    rows = []
    for name, f in summary["functions"].items():
        sp, vs, st = f["faasnap_speedup_over_lazy"], f["faasnap_vs_cached"], f["start_over_restore"]
        rows.append(
            [
                name,
                _x(sp.get("cold")),
                _x(sp.get("cached")),
                _x(vs.get("faasnap")),
                _x(vs.get("lazy")),
                " ".join(f"{m} {_x(v)}" for m, v in st.items()),
            ]
        )
    return markdown_table(
        [
            "function",
            "lazy / faasnap, cold",
            "lazy / faasnap, cached",
            "faasnap cold / faasnap cached",
            'faasnap cold / lazy cached (FaaSnap\'s "Cached")',
            "normal start / restore (cold)",
        ],
        rows,
    )


def memory_table(summary: dict) -> str:
    rows = []
    for name, f in summary["functions"].items():
        start = ((f["cells"].get("start") or {}).get("-") or {}).get("uss_mib")
        cells = " · ".join(f"{m} {_x(f['uss_vs_start'][m].get('cold'))}" for m in f["uss_vs_start"])
        snaps = f.get("snapshots") or {}
        disk = max((s.get("disk_bytes") or 0 for s in snaps.values()), default=0)
        ls = (snaps.get("faasnap") or {}).get("loading_set") or {}
        rows.append(
            [
                name,
                fmt(start),
                cells,
                fmt(disk / 2**20) if disk else "–",
                fmt(ls.get("loading_set_pages") * 4096 / 2**20 if ls.get("loading_set_pages") else None),
            ]
        )
    return markdown_table(
        [
            "function",
            "normal start USS MiB",
            "restored USS / normal (page-cache-cold)",
            "snapshot on disk MiB",
            "loading set MiB",
        ],
        rows,
    )


def targets_table(summary: dict) -> str:
    rows = [[t["function"], t["target"], _x(t["value"]), "met" if t["met"] else "missed"] for t in summary["targets"]]
    return markdown_table(["function", "target (issue 11)", "measured", ""], rows)


def plot(summary: dict, path: Path) -> Path:
    """Per function, side by side: each mode page-cache-cold (solid) and cached (light), then the
    normal start; log scale."""
    names = list(summary["functions"])
    modes = ["eager", "lazy", "reap", "faasnap"]
    slots = [(m, v) for m in modes for v in ("cold", "cached")] + [("start", "-")]
    width = 0.85 / len(slots)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(names)), 4.2))
    for i, name in enumerate(names):
        cells = summary["functions"][name]["cells"]
        for j, (mode, variant) in enumerate(slots):
            p50 = ((cells.get(mode) or {}).get(variant) or {}).get("latency_ms", {}).get("p50")
            if p50 is None:
                continue
            label = {"cold": f"{mode}, page-cache-cold", "cached": f"{mode}, cached", "-": "normal start"}[variant]
            ax.bar(
                i + (j - (len(slots) - 1) / 2) * width,
                p50,
                width * 0.95,
                color=COLORS[mode],
                alpha=0.45 if variant == "cached" else 1.0,
                label=label if i == 0 else None,
            )
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("cold start p50, ms (client: restore + first /run)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="x-small", ncol=3)
    ax.set_title("Cold start from a snapshot per restore mode (FaaSnap §6, through iceboxd)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(out: Path, summary: dict) -> list[Path]:
    cfg = summary.get("config") or {}
    text = [
        "# Cold starts from process snapshots per restore mode (issue 11; FaaSnap §6)",
        "",
        f"Per function and mode: {cfg.get('repetitions')} cold starts with the snapshot's files dropped from the "
        "page cache (`cold`) and as many with them read in full (`cached`), forced by evicting the instance, "
        f"invoked with input {cfg.get('test_input', 'B')} (the loading set was recorded with input "
        f"{cfg.get('record_input', 'A')}); medians. `start` is a normal cold start of the same function "
        "(no snapshot, no prewarmed runtime).",
        "",
        "## Cold starts",
        "",
        times_table(summary),
        "",
        "## Ratios",
        "",
        ratios_table(summary),
        "",
        "## Memory",
        "",
        memory_table(summary),
        "",
        "## Targets",
        "",
        targets_table(summary),
        "",
    ]
    if summary.get("failed"):
        text += ["## Failed", "", *[f"- {k}: {v}" for k, v in summary["failed"].items()], ""]
    files = []
    if summary["functions"]:
        files.append(plot(summary, out / "snapshot_restore.png"))
        text += [f"![cold starts]({files[0].name})", ""]
    (out / "snapshot-restore.md").write_text("\n".join(text))
    return [out / "snapshot-restore.md", *files]
