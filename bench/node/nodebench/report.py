"""Benchmark results as data (Section, Row, Check) and their markdown rendering."""

from __future__ import annotations

from dataclasses import dataclass, field

NOT_MEASURED = "not measured"


@dataclass
class Row:
    """One line of a section's results table. `met` is None where there is no target, or
    where a target could not be judged because `measured` is NOT_MEASURED."""

    metric: str
    measured: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None
    summary: str = ""  # what the summary table shows as measured, when not `measured`


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Section:
    title: str
    what: str
    rows: list[Row] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def checks(self) -> list[Row]:
        """Rows with a target: judged, or not measured."""
        return [r for r in self.rows if r.met is not None or r.measured == NOT_MEASURED]


def verdict(met: bool | None, measured: str = "") -> str:
    if measured == NOT_MEASURED:
        return "not measured"
    if met is None:
        return ""
    return "met" if met else "**missed**"


def ms(value: float) -> str:
    """Milliseconds with about three significant digits."""
    if value != value:  # NaN
        return "n/a"
    if abs(value) < 1:
        return f"{value:.3f} ms"
    if abs(value) < 10:
        return f"{value:.2f} ms"
    if abs(value) < 100:
        return f"{value:.1f} ms"
    return f"{value:.0f} ms"


def mib(value: float) -> str:
    return f"{value / (1 << 20):.1f} MiB"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "n/a"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return out


def render_section(number: int | None, s: Section) -> str:
    head = f"## {number}. {s.title}" if number is not None else f"## {s.title}"
    lines = [head, "", s.what.strip(), ""]
    if s.error:
        lines += [f"**Not measured:** {s.error}", ""]
    if s.rows:
        lines += _table(
            ["Metric", "Measured", "Baseline (same run)", "Ratio", "Target", "Verdict"],
            [[r.metric, r.measured, r.baseline, r.ratio, r.target, verdict(r.met, r.measured)] for r in s.rows],
        )
        lines.append("")
    for t in s.tables:
        lines += [f"**{t.title}**", ""] + _table(t.headers, t.rows) + [""]
    if s.notes:
        lines += [f"- {n}" for n in s.notes] + [""]
    return "\n".join(lines)


def render_summary(sections: list[Section]) -> str:
    rows = []
    for s in sections:
        if s.error and not s.checks():
            rows.append([s.title, NOT_MEASURED, "", "not measured"])
        for r in s.checks():
            rows.append([f"{s.title}: {r.metric}", r.summary or r.measured, r.target, verdict(r.met, r.measured)])
    return "\n".join(_table(["Target", "Measured", "Target value", "Verdict"], rows))
