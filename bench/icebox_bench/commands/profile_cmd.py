"""`icebox-bench profile SET -o FILE`: each function's average warm duration, for
`replay --mapping duration` (Desiccant paired trace functions with ours by execution time)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from .. import manifest
from ..client import IceboxClient, resolve_apihost, resolve_auth
from ..deploy import deploy
from ..loop import LoopError, run_loop
from ..recorder import write_json
from .common import add_connection, add_functions_dir, log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("profile", help="measure average warm durations (for --mapping duration)")
    p.add_argument("set", metavar="SET", help="python, nodejs, java, all, or a comma list")
    p.add_argument("-n", type=int, default=10, help="warm invocations per function (default 10)")
    p.add_argument("--input", choices=("A", "B"), default="A")
    p.add_argument("-o", "--output", type=Path, required=True, help="JSON file to write {function: average ms}")
    add_connection(p)
    add_functions_dir(p)
    p.set_defaults(func=main)


async def _profile(args) -> int:
    specs = manifest.select(args.set, manifest.load_all(args.functions_dir))
    durations: dict[str, float] = {}
    async with IceboxClient(resolve_apihost(args.apihost), resolve_auth(args.auth)) as client:
        await client.health()
        for spec in specs:
            await deploy(client, spec)
            try:
                # The first invocation is the cold start: measured separately, not averaged.
                records = await run_loop(client, spec.name, spec.input(args.input), args.n + 1,
                                         timeout_ms=spec.timeout_ms, strict=False, function=spec.name, log=log)
            except LoopError as e:
                log(f"error: {e}")
                continue
            warm = [r["duration_ms"] for r in records[1:] if r.get("duration_ms") is not None]
            durations[spec.name] = round(sum(warm) / len(warm), 3) if warm else 0.0
            log(f"{spec.name}: {durations[spec.name]} ms average over {len(warm)} warm invocations")
    write_json(args.output, durations)
    print(json.dumps(durations, indent=2))
    return 0 if len(durations) == len(specs) else 1


def main(args) -> int:
    return asyncio.run(_profile(args))
