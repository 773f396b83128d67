"""Run every node-runtime benchmark in one go and write the markdown report.

    python3 bench/node/run_all.py [--out docs/performance.md] [--only NAME ...]

`make bench` runs it with `--out docs/performance.md`.
"""

from __future__ import annotations

import sys

import cold_start
import freeze_thaw
import idle_instances
import throughput
import warm_latency
from nodebench import cli, machine

BENCHMARKS = {
    "warm_latency": warm_latency,
    "throughput": throughput,
    "cold_start": cold_start,
    "freeze_thaw": freeze_thaw,
    "idle_instances": idle_instances,
}


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("Run the icebox node-runtime benchmarks and write a markdown report.")
    p.add_argument(
        "--only",
        nargs="+",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help="run only these benchmarks: " + ", ".join(BENCHMARKS),
    )
    args = p.parse_args(argv)
    cli.install_signal_handlers()
    command = "python3 " + " ".join(sys.argv)
    facts = machine.facts()
    chosen = args.only or list(BENCHMARKS)
    try:
        sections = [cli.run_one(m.TITLE, m.WHAT, m.run) for name, m in BENCHMARKS.items() if name in chosen]
    except KeyboardInterrupt:
        print("interrupted: every daemon and proxy was stopped; no report written", file=sys.stderr)
        return 130
    cli.emit(cli.render_report(command, facts, sections), args.out)
    return 1 if any(s.error for s in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
