"""`icebox-bench replay`: open-loop replay of an Azure trace against a running iceboxd."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from .. import manifest, mapping, paths, schedule
from ..client import IceboxClient, resolve_apihost, resolve_auth
from ..deploy import deploy_all
from ..openloop import OpenLoop
from ..recorder import RunDir
from ..session import RunSession
from ..traces import FORMATS, Window, open_trace
from ..traces.azure2019 import EXPANSIONS
from ..units import parse_seconds, parse_window
from .common import add_connection, add_functions_dir, add_sample_period, command_line, log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "replay",
        help="open-loop replay of an Azure Functions trace",
        description="Replay a trace open-loop: every invocation is sent at its scheduled time, "
        "whether or not earlier ones have answered.",
    )
    t = p.add_argument_group("trace")
    t.add_argument(
        "--trace",
        required=True,
        help="trace directory or invocations file; a name under the traces dir (e.g. azure2019-sample100) also works",
    )
    t.add_argument("--format", choices=FORMATS, default="auto")
    t.add_argument(
        "--durations", type=Path, default=None, help="2019 durations file (default: found next to the trace)"
    )
    t.add_argument(
        "--window",
        default=None,
        metavar="START:END",
        help="trace time window, e.g. 480m:482m (units ms, s, m, h; a bare number is seconds)",
    )
    t.add_argument(
        "--expansion",
        choices=EXPANSIONS,
        default="even",
        help="2019 per-minute counts: evenly spaced (60/(n+1) s apart) or uniformly random",
    )
    t.add_argument("--seed", type=int, default=0, help="seed for random expansion and round-robin mapping")
    m = p.add_argument_group("mapping")
    m.add_argument("--functions", default="all", help="benchmark functions: all, python, nodejs, java or a comma list")
    m.add_argument("--input", choices=("A", "B"), default="A", help="input size of every function")
    m.add_argument("--mapping", choices=mapping.MODES, default="round-robin")
    m.add_argument("--mapping-file", type=Path, default=None, help="JSON {trace function: benchmark function}")
    m.add_argument(
        "--function-durations",
        type=Path,
        default=None,
        help="JSON {function: average ms} from `icebox-bench profile` (for --mapping duration*)",
    )
    r = p.add_argument_group("timing")
    r.add_argument("--scale", type=float, default=1.0, help="scale factor: inter-arrival times are divided by it")
    r.add_argument("--warmup", default="0", help="warm-up at the start, excluded from results (e.g. 60s)")
    r.add_argument("--warmup-scale", type=float, default=None, help="scale factor during the warm-up (default --scale)")
    r.add_argument("--duration", default=None, help="measured replay time after the warm-up (e.g. 180s)")
    r.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for answers after the last send (default 120)",
    )
    p.add_argument("--out", type=Path, required=False, help="output directory (must be new or empty)")
    p.add_argument("--no-deploy", action="store_true", help="the functions are already deployed")
    p.add_argument("--dry-run", action="store_true", help="print the schedule's shape and exit")
    add_connection(p)
    add_functions_dir(p)
    add_sample_period(p)
    p.set_defaults(func=main)


def resolve_trace(value: str) -> Path:
    path = Path(value)
    if not path.exists() and (paths.traces_dir() / value).exists():
        return paths.traces_dir() / value
    return path


def plan(args):
    """(specs, trace, mapping, schedule) from the arguments, before any network access."""
    specs = manifest.select(args.functions, manifest.load_all(args.functions_dir))
    lo, hi = parse_window(args.window) if args.window else (None, None)
    window = Window(lo, hi)
    trace = open_trace(
        resolve_trace(args.trace),
        format=args.format,
        durations=args.durations,
        window=window,
        expansion=args.expansion,
        seed=args.seed,
    )
    if not trace.invocations:
        raise ValueError(f"the trace has no invocation in the window {args.window or '(whole trace)'}")
    bench_durations = None
    if args.function_durations:
        bench_durations = {k: float(v) for k, v in json.loads(args.function_durations.read_text()).items()}
    names = [s.name for s in specs]
    mapped = mapping.map_functions(
        args.mapping,
        trace.functions,
        trace.durations_ms,
        names,
        seed=args.seed,
        bench_durations=bench_durations,
        mapping_file=args.mapping_file,
    )
    timeline = schedule.Timeline(
        origin_s=lo if lo is not None else trace.invocations[0].time_s,
        scale=args.scale,
        warmup_s=parse_seconds(args.warmup),
        warmup_scale=args.warmup_scale,
        duration_s=parse_seconds(args.duration) if args.duration else None,
    )
    sched = schedule.build(trace.invocations, mapped, timeline)
    if not sched.items:
        raise ValueError("the schedule is empty: no mapped invocation falls inside the timeline")
    return specs, trace, mapped, sched


def describe(trace, mapped: dict, sched: schedule.Schedule) -> str:
    length = sched.length_s()
    per_second = Counter(int(s.offset_s) for s in sched.items)
    lines = [
        f"trace: {trace.format}, {len(trace.invocations)} invocations of {len(trace.functions)} functions"
        " in the window",
        f"mapping: {len(mapped)} trace functions onto {len(set(mapped.values()))} benchmark functions",
        f"schedule: {len(sched.items)} invocations ({len(sched.measured)} measured) over {length:.1f} s, "
        f"mean {len(sched.items) / max(length, 1e-9):.1f}/s, peak {max(per_second.values())}/s in one second",
    ]
    if trace.skipped:
        lines.append(f"skipped malformed rows: {trace.skipped_total()} ({dict(trace.skipped)})")
    dropped = {k: v for k, v in sched.dropped.items() if v}
    if dropped:
        lines.append(f"left out of the schedule: {dropped}")
    if not sched.measured:
        lines.append("warning: every invocation falls in the warm-up: widen --window or shorten --warmup")
    return "\n".join(lines)


async def _replay(args, specs, trace, mapped, sched) -> int:
    by_name = {s.name: s for s in specs}
    used = sorted(set(mapped.values()))
    async with IceboxClient(resolve_apihost(args.apihost), resolve_auth(args.auth)) as client:
        await client.health()
        run_dir = RunDir(args.out)
        if not args.no_deploy:
            await deploy_all(client, [by_name[n] for n in used], log=log)
        config = {
            "command": command_line(),
            "kind": "replay",
            "trace": {
                "format": trace.format,
                "sources": trace.sources,
                "window": args.window,
                "expansion": args.expansion,
                "seed": args.seed,
                "skipped": dict(trace.skipped),
            },
            "mapping": {"mode": args.mapping, "seed": args.seed, "functions": mapped},
            "timeline": sched.timeline.__dict__,
            "input": args.input,
            "functions": {n: {"language": by_name[n].language, "kind": by_name[n].kind} for n in used},
            "scheduled": len(sched.items),
            "dropped": sched.dropped,
        }
        async with RunSession(client, run_dir, config, sample_period_s=args.sample_period, log=log) as session:
            driver = OpenLoop(
                client,
                sched,
                session.invocations,
                params={n: by_name[n].input(args.input) for n in used},
                action_timeouts_ms={n: by_name[n].timeout_ms for n in used if by_name[n].timeout_ms},
                drain_timeout_s=args.drain_timeout,
                log=log,
            )
            log(f"replaying into {run_dir.path} ...")
            result = await driver.run()
            session.result.update(result.to_json())
    print(json.dumps({"out": str(args.out), **result.to_json()}, indent=2))
    accounted = sum(result.statuses.values())
    if accounted != result.scheduled:
        log(f"error: {result.scheduled} invocations scheduled but {accounted} recorded")
        return 1
    return 1 if result.aborted else 0


def main(args) -> int:
    specs, trace, mapped, sched = plan(args)
    log(describe(trace, mapped, sched))
    if args.dry_run:
        return 0
    if args.out is None:
        raise ValueError("--out DIR is required (except with --dry-run)")
    return asyncio.run(_replay(args, specs, trace, mapped, sched))
