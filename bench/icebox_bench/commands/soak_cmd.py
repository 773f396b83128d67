"""`icebox-bench soak --out DIR`: load with random instance kills against a private iceboxd
(docs/reliability.md). Writes DIR/soak.json, DIR/soak.md and DIR/iceboxd.log; prints the
markdown. Exit status 0 only if the daemon never failed and nothing was left behind."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..soak.report import render
from ..soak.run import SoakConfig, passed, run
from .common import command_line, log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "soak",
        help="concurrent blocking invokes while instance processes are SIGKILLed",
        description="Start iceboxd (default flags, temp state dir, free port on 127.0.0.1), "
        "deploy a few Python and Node.js actions, run closed-loop clients for a "
        "fixed time while instance processes are killed, then stop the daemon and "
        "check nothing is left.",
    )
    p.add_argument("--out", type=Path, required=True, help="output directory (soak.json, soak.md, iceboxd.log)")
    p.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    p.add_argument("--duration", type=float, default=60.0, metavar="SECONDS", help="load time (default 60)")
    p.add_argument(
        "--kill-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="mean time between kills, each uniform in [0.5, 1.5] x this; 0: no kills (default 1)",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request without an answer by then counts as a daemon failure (default 30)",
    )
    p.add_argument("--max-requests", type=int, default=1_000_000, help="stop the load after this many (default 1e6)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the action mix and the kills (default 1)")
    p.add_argument(
        "--daemon-args",
        default="",
        metavar="FLAGS",
        help="more iceboxd flags, quoted (e.g. '--offload-pool zram:1GiB --offload faasmem'); default: none",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    cfg = SoakConfig(
        clients=args.clients,
        duration_s=args.duration,
        kill_interval_s=args.kill_interval,
        request_timeout_s=args.request_timeout,
        max_requests=args.max_requests,
        seed=args.seed,
        daemon_args=shlex.split(args.daemon_args),
    )
    cfg.validate()
    result, interrupted = run(cfg, args.out, log)
    result["command"] = command_line()
    ok = passed(result)
    (args.out / "soak.json").write_text(json.dumps(result, indent=2) + "\n")
    text = render(result, ok)
    (args.out / "soak.md").write_text(text)
    print(text, end="")
    log(f"written: {args.out / 'soak.json'}, {args.out / 'soak.md'}")
    if interrupted:
        return 130
    return 0 if ok else 1
