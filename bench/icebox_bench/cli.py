"""`icebox-bench`: the command line. Each subcommand lives in commands/<name>_cmd.py."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from . import __version__
from .client import IceboxError
from .commands import (
    common,
    deploy_cmd,
    list_cmd,
    loop_cmd,
    profile_cmd,
    replay_cmd,
    report_cmd,
    run_cmd,
    selftest_cmd,
    soak_cmd,
)
from .daemon import DaemonError
from .manifest import ManifestError
from .mapping import MappingError

COMMANDS = (deploy_cmd, replay_cmd, loop_cmd, profile_cmd, report_cmd, run_cmd, selftest_cmd, list_cmd, soak_cmd)
# Failures whose message says everything: shown without a traceback (unless
# ICEBOX_BENCH_DEBUG=1, for when the message is not enough).
EXPECTED_ERRORS = (
    IceboxError,
    DaemonError,
    ManifestError,
    MappingError,
    FileNotFoundError,
    FileExistsError,
    ValueError,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icebox-bench", description="icebox benchmark harness (docs/bench.md)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    common.set_argv(argv)
    args = build_parser().parse_args(argv)
    # SIGTERM (a CI timeout, `kill`) takes the same path as Ctrl-C, so the daemons a run
    # started are stopped and its cgroups removed by the finally blocks on the way out.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted; the run directory keeps what was recorded", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as e:
        if os.environ.get("ICEBOX_BENCH_DEBUG") == "1":
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
