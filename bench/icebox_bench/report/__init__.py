"""`icebox-bench report`: side-by-side tables and plots for one or more run directories."""

from __future__ import annotations

from pathlib import Path

from ..recorder import write_json
from . import plots, tables
from .load import RunData, load_run
from .metrics import RunMetrics, compute

PLOT_FILES = ("latency_cdf.png", "memory_timeline.png", "cold_starts.png")


def _unique_labels(runs: list[RunData]) -> None:
    """Runs in directories with the same name get their parent's name too."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    for run in runs:
        if seen[run.label] > 1:
            run.label = f"{run.path.parent.name}/{run.path.name}"


def render_markdown(runs: list[RunData], metrics: list[RunMetrics], plot_names: list[str]) -> str:
    parts = ["# icebox-bench report", ""]
    parts += [
        f"- **{r.label}**: `{r.path}`" + (f" — {r.config.get('command')}" if r.config.get("command") else "")
        for r in runs
    ]
    parts += [
        "",
        "## Summary",
        "",
        tables.summary_table(metrics),
        "",
        "Latency is client-side, of successful invocations; warm-up invocations are excluded. "
        "Memory is the sum of the live instances' USS per memory sample; idle memory is the "
        "time integral of idle, frozen and prewarmed instances' USS.",
        "",
        "## Outcomes",
        "",
        tables.status_table(metrics),
        "",
        "## Per function",
        "",
        tables.function_table(metrics),
        "",
        "## Plots",
        "",
    ]
    parts += [f"![{name}]({name})" for name in plot_names]
    return "\n".join(parts) + "\n"


def write_report(run_dirs: list[Path], out: Path) -> tuple[str, list[Path]]:
    """Write report.md, metrics.json and the PNGs into `out`; returns (markdown, files)."""
    runs = [load_run(Path(d)) for d in run_dirs]
    _unique_labels(runs)
    metrics = [compute(r) for r in runs]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [
        plots.latency_cdf(runs, out / PLOT_FILES[0]),
        plots.memory_timeline(runs, metrics, out / PLOT_FILES[1]),
        plots.cold_starts_over_time(runs, metrics, out / PLOT_FILES[2]),
    ]
    markdown = render_markdown(runs, metrics, [f.name for f in files])
    (out / "report.md").write_text(markdown)
    write_json(out / "metrics.json", [m.to_json() for m in metrics])
    return markdown, [out / "report.md", out / "metrics.json", *files]


__all__ = ["write_report", "compute", "load_run"]
