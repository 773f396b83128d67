"""`icebox-bench loop FUNCTION -n 100`: n sequential invocations in one instance."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from .. import manifest
from ..client import IceboxClient, resolve_apihost, resolve_auth
from ..deploy import deploy
from ..loop import run_loop
from ..recorder import RunDir
from ..session import RunSession
from ..units import MIB
from .common import add_connection, add_functions_dir, add_sample_period, command_line, log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "loop",
        help="n sequential invocations in one instance, memory after each exit",
        description="Deploy FUNCTION (a new version, so a fresh instance serves it), invoke "
        "it n times in a row and measure the instance after every exit.",
    )
    p.add_argument("function", metavar="FUNCTION")
    p.add_argument("-n", type=int, default=100, help="invocations (default 100)")
    p.add_argument("--input", choices=("A", "B"), default="A")
    p.add_argument("--out", type=Path, required=True, help="output directory (must be new or empty)")
    p.add_argument("--no-deploy", action="store_true", help="use the deployed action as it is")
    add_connection(p)
    add_functions_dir(p)
    add_sample_period(p)
    p.set_defaults(func=main)


async def _loop(args) -> int:
    selected = manifest.select(args.function, manifest.load_all(args.functions_dir))
    if len(selected) != 1:
        raise ValueError(f"loop runs one function; {args.function!r} selects {len(selected)}")
    spec = selected[0]
    if args.n < 1:
        raise ValueError("-n must be at least 1")
    async with IceboxClient(resolve_apihost(args.apihost), resolve_auth(args.auth)) as client:
        await client.health()
        run_dir = RunDir(args.out)
        if not args.no_deploy:
            await deploy(client, spec)
        config = {
            "command": command_line(),
            "kind": "loop",
            "function": spec.name,
            "language": spec.language,
            "n": args.n,
            "input": args.input,
        }
        async with RunSession(client, run_dir, config, sample_period_s=args.sample_period, log=log) as session:
            records = await run_loop(
                client,
                spec.name,
                spec.input(args.input),
                args.n,
                invocations=session.invocations,
                exits=run_dir.jsonl("exits.jsonl"),
                timeout_ms=spec.timeout_ms,
                strict=False,
                function=spec.name,
                log=log,
            )
            instances = sorted({r["instance"] for r in records})
            session.result.update({"iterations": len(records), "instances": instances})
    uss = [r["uss"] / MIB for r in records]
    print(
        json.dumps(
            {
                "out": str(args.out),
                "function": spec.name,
                "instances": instances,
                "uss_mib": {"first": round(uss[0], 2), "last": round(uss[-1], 2), "max": round(max(uss), 2)},
            },
            indent=2,
        )
    )
    return 0 if len(instances) == 1 else 1


def main(args) -> int:
    return asyncio.run(_loop(args))
