"""The overheads section both FaaSMem recipes' reports share (overheads.run_overheads)."""

from __future__ import annotations

from ..report.tables import fmt, markdown_table


def _histogram_rows(label: str, histograms: dict | None, what: str) -> list[list[str]]:
    if histograms is None:
        return [[label, what, "not exported", "–", "–", "–"]]
    return [
        [label, f"{what} {key or '–'}", fmt(h["count"]), fmt(h["mean_ms"], 2), fmt(h["p95_ms"], 2), fmt(h["p99_ms"], 2)]
        for key, h in histograms.items()
    ]


def overheads_section(runs: dict[str, dict]) -> str:
    """runs: {run label: overheads dict}."""
    timing, cost = [], []
    for label, o in runs.items():
        timing += _histogram_rows(label, o.get("barriers"), "barrier")
        timing += _histogram_rows(label, o.get("steps"), "step")
        per_request = o.get("refaulted_bytes_per_request")
        cpu = o.get("cpu") or {}
        cost.append(
            [
                label,
                fmt(None if per_request is None else per_request / 1024, 1),
                fmt(o.get("daemon_cpu_s"), 2),
                fmt(cpu.get("total_s"), 1),
                cpu.get("method") or "–",
            ]
        )
    return "\n".join(
        [
            "## Overheads",
            "",
            "Barrier and step times: the daemon's histograms `icebox_offload_barrier_seconds{barrier}` and "
            "`icebox_offload_step_seconds{step}`, observations inside the run (p95/p99 estimated from buckets).",
            "",
            markdown_table(["run", "what", "count", "mean (ms)", "p95 (ms)", "p99 (ms)"], timing),
            "",
            markdown_table(
                [
                    "run",
                    "refaulted per request (KiB)",
                    "daemon CPU, utime+stime (s)",
                    "daemon + instances CPU (s)",
                    "CPU method",
                ],
                cost,
            ),
        ]
    )
