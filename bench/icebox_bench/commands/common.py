"""Options and helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def log(message: str) -> None:
    """Progress and warnings go to stderr; stdout carries only results."""
    print(message, file=sys.stderr, flush=True)


def add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--apihost", default=None, help="iceboxd URL (default: $ICEBOX_APIHOST, else http://127.0.0.1:8740)"
    )
    parser.add_argument(
        "--auth", default=None, help="API key uuid:key (default: $ICEBOX_AUTH, else var/auth as `make run` leaves it)"
    )


def add_functions_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--functions-dir",
        type=Path,
        default=None,
        help="directory with <lang>/functions.json manifests (default: $ICEBOX_FUNCTIONS_DIR, else functions/)",
    )


def add_sample_period(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sample-period",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="memory sampling period (default 1 s; the daemon measures every --sample-interval)",
    )


_argv: list[str] | None = None


def set_argv(argv: list[str]) -> None:
    """The arguments this command was run with (cli.main may be called with its own list)."""
    global _argv
    _argv = list(argv)


def command_line() -> str:
    """The command as typed, for config.json."""
    argv = _argv if _argv is not None else sys.argv[1:]
    return " ".join(shlex.quote(a) for a in ["icebox-bench", *argv])
