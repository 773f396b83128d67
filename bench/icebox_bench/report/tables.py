"""Markdown tables: one column per run, so runs read side by side."""

from __future__ import annotations

from .metrics import RunMetrics


def fmt(value, digits: int = 1, suffix: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{suffix}"
    return f"{value:,}{suffix}"


def pct(value) -> str:
    return "–" if value is None else f"{100.0 * value:.1f} %"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def summary_table(runs: list[RunMetrics]) -> str:
    def row(label, getter):
        return [label] + [getter(m) for m in runs]

    rows = [
        row("invocations (measured)", lambda m: fmt(m.invocations)),
        row("succeeded", lambda m: fmt(m.successes)),
        row("failed or not answered", lambda m: fmt(m.invocations - m.successes)),
        row("p50 latency (ms)", lambda m: fmt(m.latency_ms.get("p50"))),
        row("p90 latency (ms)", lambda m: fmt(m.latency_ms.get("p90"))),
        row("p95 latency (ms)", lambda m: fmt(m.latency_ms.get("p95"))),
        row("p99 latency (ms)", lambda m: fmt(m.latency_ms.get("p99"))),
        row("cold-start rate", lambda m: pct(m.cold_start_rate)),
        row("throughput (invocations/s)", lambda m: fmt(m.throughput_per_s, 2)),
        row("mean memory, USS (MiB)", lambda m: fmt(m.memory_mean_mib)),
        row("peak memory, USS (MiB)", lambda m: fmt(m.memory_peak_mib)),
        row("mean memory, PSS (MiB)", lambda m: fmt(m.pss_mean_mib)),
        row("idle memory, USS (GiB·s)", lambda m: fmt(m.idle_gib_s, 2)),
        row("measured window (s)", lambda m: fmt(m.window_s)),
        row(
            "schedule lag p50 / p99 (ms)",
            lambda m: f"{fmt(m.lag_ms.get('p50'), 2)} / {fmt(m.lag_ms.get('p99'), 2)}" if m.lag_ms else "–",
        ),
    ]
    return markdown_table(["metric"] + [m.label for m in runs], rows)


def function_table(runs: list[RunMetrics]) -> str:
    """Per function: p50 / p99 latency (ms) and cold-start rate, one column per run."""
    names = sorted({f.function for m in runs for f in m.functions})
    rows = []
    for name in names:
        cells = [name]
        for m in runs:
            f = next((f for f in m.functions if f.function == name), None)
            if f is None:
                cells.append("–")
            else:
                cells.append(
                    f"{fmt(f.latency_ms.get('p50'))} / {fmt(f.latency_ms.get('p99'))} ms, "
                    f"cold {pct(f.cold_start_rate)} (n={f.invocations})"
                )
        rows.append(cells)
    return markdown_table(["function (p50 / p99, cold rate)"] + [m.label for m in runs], rows)


def status_table(runs: list[RunMetrics]) -> str:
    statuses = sorted({s for m in runs for s in m.statuses})
    rows = [[s] + [fmt(m.statuses.get(s, 0)) for m in runs] for s in statuses]
    return markdown_table(["status"] + [m.label for m in runs], rows)
