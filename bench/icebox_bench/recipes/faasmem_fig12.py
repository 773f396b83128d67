"""Recipe `faasmem-fig12`: FaaSMem §8.2, Fig. 12. See faasmem_eval/fig12_run.py for the protocol,
faasmem_eval/fig12.py for the figures and docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from .. import manifest
from ..commands.common import command_line
from ..commands.replay_cmd import resolve_trace
from ..faasmem_eval import fig12, fig12_render, loads
from ..faasmem_eval.fig12_run import Plan, run_label, run_one, scaled_keep_alive_s
from ..faasmem_eval.run import attempt, check_prerequisites
from ..traces import Window, open_trace
from ..units import parse_seconds, parse_window
from . import register
from .base import Recipe, RecipeContext


def choices(text, allowed: tuple[str, ...], what: str) -> list[str]:
    """A comma list, each item one of `allowed`, in the order given."""
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items or any(x not in allowed for x in items):
        raise ValueError(f"invalid {what} {text!r}: choose from {', '.join(allowed)}")
    return items


def keep_alive_and_tail(settings: dict) -> tuple[float, float]:
    """`auto` keep-alive: the paper's 10 minutes / speed; `auto` tail: the keep-alive."""
    speed = float(settings["speed"])
    keep_alive = (
        scaled_keep_alive_s(speed) if str(settings["keep_alive"]) == "auto" else parse_seconds(settings["keep_alive"])
    )
    tail = keep_alive if str(settings["tail"]) == "auto" else parse_seconds(settings["tail"])
    return keep_alive, tail


@register
class FaasmemFig12(Recipe):
    name = "faasmem-fig12"
    description = (
        "Azure 2021 trace replay (high and low load) with offload modes none, tmo, faasmem: "
        "local memory, p95 latency, bytes offloaded per function"
    )
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--functions",
            default=None,
            help="benchmark functions (default: the paper's 11 that exist in functions/python)",
        )
        parser.add_argument("--trace", default=None, help="trace directory or name (default azure2021-sample)")
        parser.add_argument("--trace-window", default=None, help="trace time replayed, START:END (default all)")
        parser.add_argument("--loads", default=None, help="high,low (default both)")
        parser.add_argument("--modes", default=None, help="offload modes (default none,tmo,faasmem)")
        parser.add_argument("--speed", type=float, default=None, help="time compression of the trace (default 2)")
        parser.add_argument(
            "--keep-alive", default=None, help="keep-alive of the replay daemons (default auto: 10 min / speed)"
        )
        parser.add_argument(
            "--tail", default=None, help="time after the last send still measured (default auto: the keep-alive)"
        )
        parser.add_argument(
            "--offload-pool",
            default=None,
            help="the pool of every replay daemon, every mode (default zram:4GiB; needs root)",
        )
        parser.add_argument(
            "--replay-daemon-args",
            default=None,
            help="extra flags for every replay daemon, quoted "
            "(default --prewarm none --pool-memory 16GiB --reclaim-mode vanilla)",
        )
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")
        parser.add_argument("--seed", type=int, default=None, help="seed of the trace-to-function mapping (default 0)")

    def plan(self, ctx: RecipeContext) -> tuple[Plan, dict]:
        s = ctx.settings
        speed = float(s["speed"])
        keep_alive, tail = keep_alive_and_tail(s)
        start, end = parse_window(str(s["trace_window"]))
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        trace = open_trace(resolve_trace(str(s["trace"])), window=Window(start, end))
        origin = start if start is not None else 0.0
        planned = loads.plan_loads(trace.invocations, [x.name for x in specs], seed=int(s["seed"]))
        plan = Plan(
            specs=specs,
            trace=trace,
            trace_name=str(s["trace"]),
            loads=planned,
            origin_s=origin,
            speed=speed,
            keep_alive_s=keep_alive,
            tail_s=tail,
            pool=str(s["offload_pool"]),
            daemon_args=shlex.split(str(s.get("replay_daemon_args") or "")),
            size=s["input"],
            drain_timeout_s=float(s["drain_timeout"]),
            sample_period_s=ctx.session.sampler.period_s,
        )
        config = {
            "trace": str(s["trace"]),
            "trace_window": str(s["trace_window"]),
            "origin_s": origin,
            "speed": speed,
            "keep_alive_s": keep_alive,
            "tail_s": tail,
            "offload_pool": plan.pool,
            "daemon_args": plan.flags("MODE"),
            "loads": choices(s["loads"], loads.LOADS, "--loads"),
            "modes": choices(s["modes"], fig12.MODES, "--modes"),
            "functions": [x.name for x in specs],
            "split": planned,
            "failed": {},
        }
        return plan, config

    async def run(self, ctx: RecipeContext) -> dict:
        plan, config = self.plan(ctx)
        check_prerequisites(plan.flags("faasmem"))
        ctx.run_dir.write_json("mapping.json", config["split"])
        runs: dict[str, dict] = {load: {} for load in config["loads"]}
        for load in config["loads"]:
            for mode in config["modes"]:
                label = run_label(load, mode)
                entry = await attempt(
                    label,
                    run_one(plan, load, mode, ctx.run_dir.path / "runs" / label, command=command_line(), log=ctx.log),
                    config["failed"],
                    ctx.log,
                )
                if entry is None:
                    continue
                runs[load][mode] = entry
                node = entry["node"]
                ctx.log(
                    f"[{label}] local memory {node['local_mean_mib']} MiB (mean), p95 "
                    f"{node['latency_ms']['p95']} ms, offloaded {node['offloaded_mib']} MiB"
                )
                ctx.run_dir.write_json("summary.json", fig12.summary(config, runs))
        if config["failed"]:
            ctx.session.result["failed"] = config["failed"]
        return fig12.summary(config, runs)

    def render(self, out: Path, summary: dict) -> list[Path]:
        return fig12_render.render(out, summary)
