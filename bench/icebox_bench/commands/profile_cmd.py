"""`icebox-bench profile SET -o FILE`: each function's average warm duration, for
`replay --mapping duration` (Desiccant paired trace functions with ours by execution time).
With `--sim FILE`: the simulator's profile (ISOLATES_SPEC §6, isolates_eval/sim_profile.py)
measured on the live node: cold start, warm duration, base/increment per sharing mode, idle
memory without and with Desiccant."""

from __future__ import annotations

import asyncio
import datetime
import json
import socket
from pathlib import Path

from .. import manifest
from ..client import IceboxClient, IceboxError, resolve_apihost, resolve_auth
from ..deploy import deploy
from ..frozen_garbage.baseline import start_companion, stop_companion
from ..isolates_eval import sim_profile
from ..isolates_eval.memory_run import MemoryPlan
from ..isolates_eval.options import int_list, mode_list
from ..isolates_eval.sim_profile_run import measure_function
from ..loop import LoopError, run_loop
from ..recorder import write_json
from .common import add_connection, add_functions_dir, log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "profile", help="measure average warm durations (for --mapping duration), or the simulator's profile (--sim)"
    )
    p.add_argument("set", metavar="SET", help="python, nodejs, java, all, or a comma list")
    p.add_argument(
        "-n", type=int, default=10, help="warm invocations per function (per cold start with --sim; default 10)"
    )
    p.add_argument("--input", choices=("A", "B"), default="A")
    p.add_argument("-o", "--output", type=Path, default=None, help="JSON file to write {function: average ms}")
    s = p.add_argument_group("simulator profile (--sim)")
    s.add_argument(
        "--sim",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the icebox-sim profile JSON (cold start, warm ms, base/increment per mode, idle MB)",
    )
    s.add_argument("--modes", default="process,shared,isolate", help="sharing modes measured (default all three)")
    s.add_argument("--levels", default="1,2,4,8", help="concurrency levels of the memory fit (default 1,2,4,8)")
    s.add_argument("--hold", type=float, default=2.0, help="seconds sampled per level (default 2)")
    s.add_argument("--cold-runs", type=int, default=3, help="cold starts per function (default 3)")
    s.add_argument(
        "--measure",
        choices=("pss", "uss", "rss"),
        default="uss",
        help="memory measure (default uss: it adds up across instances, as the simulator charges them)",
    )
    s.add_argument(
        "--idle-after",
        type=int,
        default=None,
        metavar="N",
        help="idle memory of an instance after N invocations (default: after the last cold start's -n warm ones)",
    )
    s.add_argument(
        "--memory-mb", type=int, default=2048, help="action memory limit while measuring modes (default 2048)"
    )
    add_connection(p)
    add_functions_dir(p)
    p.set_defaults(func=main)


async def _durations(client: IceboxClient, specs, args) -> dict[str, float]:
    durations: dict[str, float] = {}
    for spec in specs:
        await deploy(client, spec)
        try:
            # The first invocation is the cold start: measured separately, not averaged.
            records = await run_loop(
                client,
                spec.name,
                spec.input(args.input),
                args.n + 1,
                timeout_ms=spec.timeout_ms,
                strict=False,
                function=spec.name,
                log=log,
            )
        except LoopError as e:
            log(f"error: {e}")
            continue
        warm = [r["duration_ms"] for r in records[1:] if r.get("duration_ms") is not None]
        durations[spec.name] = round(sum(warm) / len(warm), 3) if warm else 0.0
        log(f"{spec.name}: {durations[spec.name]} ms average over {len(warm)} warm invocations")
    return durations


async def _sim_profile(client: IceboxClient, specs, args) -> tuple[dict, dict]:
    plan = MemoryPlan(
        levels=int_list(args.levels), measure=args.measure, memory_mb=args.memory_mb, hold_s=args.hold, size=args.input
    )
    modes = mode_list(args.modes)
    functions, details = {}, {}
    health = await client.health()
    languages = sorted({s.language for s in specs})
    companions = []
    try:
        for spec in specs:
            if spec.language not in companions:
                await start_companion(client, spec.language, spec.kind, None)
                companions.append(spec.language)
            try:
                functions[spec.name], details[spec.name] = await measure_function(
                    client, spec, plan, modes, runs=args.cold_runs, warm_n=args.n, idle_after=args.idle_after, log=log
                )
            except (IceboxError, RuntimeError, ValueError) as e:
                log(f"error: {spec.name}: {e}")
                details[spec.name] = {"error": str(e)}
    finally:
        for language in companions:
            await stop_companion(client, language)
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    source = (
        f"icebox-bench profile --sim on {socket.gethostname()} at {when}: {plan.measure.upper()}, levels "
        f"{plan.levels}, {args.cold_runs} cold starts x {args.n} warm, iceboxd {health.get('version', '?')}, "
        f"languages {', '.join(languages)}; base = memory at n=0 (charge base + n x increment)"
    )
    return sim_profile.profile(source, functions), details


async def _profile(args) -> int:
    if args.output is None and args.sim is None:
        raise ValueError("give -o FILE (warm durations) and/or --sim FILE (simulator profile)")
    specs = manifest.select(args.set, manifest.load_all(args.functions_dir))
    ok = True
    async with IceboxClient(resolve_apihost(args.apihost), resolve_auth(args.auth)) as client:
        await client.health()
        if args.output is not None:
            durations = await _durations(client, specs, args)
            write_json(args.output, durations)
            print(json.dumps(durations, indent=2))
            ok = len(durations) == len(specs)
        if args.sim is not None:
            profile, details = await _sim_profile(client, specs, args)
            write_json(args.sim, profile)
            write_json(args.sim.with_suffix(".details.json"), details)
            print(json.dumps(profile, indent=2))
            ok = ok and len(profile["functions"]) == len(specs)
    return 0 if ok else 1


def main(args) -> int:
    return asyncio.run(_profile(args))
