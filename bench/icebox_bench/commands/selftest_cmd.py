"""`icebox-bench selftest-lag`: how late does the open-loop driver send?

Starts the dummy server (dummy_server.py) in its own process, schedules invocations evenly at
--rate per second through the same driver and recording path as `replay`, and prints the
schedule-lag percentiles. The target is a median of at most 2 ms at 500 invocations/s.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .. import schedule
from ..client import IceboxClient
from ..daemon import free_port
from ..openloop import OpenLoop
from ..recorder import RunDir
from ..session import RunSession
from .common import log

TARGET_MEDIAN_MS = 2.0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("selftest-lag", help="measure the driver's schedule lag against a dummy server")
    p.add_argument("--rate", type=float, default=500.0, help="scheduled invocations per second (default 500)")
    p.add_argument("--seconds", type=float, default=10.0, help="length of the schedule (default 10)")
    p.add_argument(
        "--server-delay-ms",
        type=float,
        default=20.0,
        help="the dummy's answer time, so answers overlap later sends (default 20)",
    )
    p.add_argument("--out", type=Path, default=None, help="keep the run directory here (default: a temp dir)")
    p.set_defaults(func=main)


def _start_server(port: int, delay_ms: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "icebox_bench.dummy_server", "--port", str(port), "--delay-ms", str(delay_ms)],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the dummy server exited at start-up")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/icebox/v1/health", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the dummy server did not start within 15 s")


async def _drive(apihost: str, out: Path, rate: float, seconds: float) -> dict:
    sched = schedule.uniform(rate, seconds, ["dummy"])
    async with IceboxClient(apihost, "selftest:selftest") as client:
        run_dir = RunDir(out)
        config = {"kind": "selftest-lag", "rate": rate, "seconds": seconds}
        async with RunSession(client, run_dir, config, log=log) as session:
            result = await OpenLoop(client, sched, session.invocations, log=log).run()
            session.result.update(result.to_json())
    return result.to_json()


def main(args) -> int:
    port = free_port()
    server = _start_server(port, args.server_delay_ms)
    scratch = None if args.out else tempfile.TemporaryDirectory(prefix="icebox-bench-lag-")
    try:
        out = args.out or Path(scratch.name) / "run"
        result = asyncio.run(_drive(f"http://127.0.0.1:{port}", out, args.rate, args.seconds))
    finally:
        server.terminate()
        server.wait(timeout=10)
        if scratch is not None:
            scratch.cleanup()
    lag = result["lag_ms"]
    print(
        json.dumps(
            {
                "rate_per_s": args.rate,
                "seconds": args.seconds,
                "scheduled": result["scheduled"],
                "statuses": result["statuses"],
                "lag_ms": lag,
                "run_dir": str(args.out) if args.out else None,
            },
            indent=2,
        )
    )
    ok = lag.get("p50") is not None and lag["p50"] <= TARGET_MEDIAN_MS
    print(
        f"median schedule lag {lag.get('p50'):.3f} ms at {args.rate:g}/s: "
        f"{'within' if ok else 'OVER'} the {TARGET_MEDIAN_MS:g} ms target"
    )
    return 0 if ok else 1
