"""`icebox-bench report DIR [DIR...]`: side-by-side tables and plots."""

from __future__ import annotations

from pathlib import Path

from ..report import write_report
from .common import log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="tables (markdown) and plots (PNG) comparing run directories")
    p.add_argument("dirs", metavar="DIR", nargs="+", type=Path)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write report.md, metrics.json and the PNGs (default: DIR/report for one DIR)",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    out = args.out
    if out is None:
        if len(args.dirs) > 1:
            raise ValueError("with several run directories, say where the report goes: --out DIR")
        out = args.dirs[0] / "report"
    markdown, files = write_report(args.dirs, out)
    print(markdown)
    log("wrote " + ", ".join(str(f) for f in files))
    return 0
