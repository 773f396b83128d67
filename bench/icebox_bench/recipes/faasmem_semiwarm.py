"""Recipe `faasmem-semiwarm`: FaaSMem §6 / Fig. 13's timeline. See faasmem_eval/semiwarm.py and
docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from .. import manifest
from ..commands.common import command_line
from ..faasmem_eval import semiwarm, semiwarm_render
from ..faasmem_eval.run import Replay, attempt, check_prerequisites, run_replay
from ..units import parse_seconds
from . import register
from .base import Recipe, RecipeContext


def flags(settings: dict, variant: str) -> list[str]:
    return [
        "--offload-pool",
        str(settings["offload_pool"]),
        "--offload",
        "faasmem",
        "--semiwarm",
        variant,
        "--keep-alive",
        str(settings["keep_alive"]),
        *shlex.split(str(settings.get("replay_daemon_args") or "")),
    ]


@register
class FaasmemSemiwarm(Recipe):
    name = "faasmem-semiwarm"
    description = (
        "one function with a sparse invocation pattern, --semiwarm on and off: local memory through keep-alive"
    )
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--function", default=None, help="the benchmark function (default web_server)")
        parser.add_argument("--burst", type=int, default=None, help="requests per burst (default 6)")
        parser.add_argument("--gap", default=None, help="time between a burst's requests (default 2s)")
        parser.add_argument("--idle", default=None, help="idle time after each burst (default 150s)")
        parser.add_argument("--cycles", type=int, default=None, help="bursts before the last wake request (default 1)")
        parser.add_argument("--variants", default=None, help="--semiwarm values, comma separated (default 1%%/s,off)")
        parser.add_argument("--keep-alive", default=None, help="keep-alive, longer than --idle (default 10m)")
        parser.add_argument("--tail", default=None, help="measured after the last request (default 10s)")
        parser.add_argument("--offload-pool", default=None, help="the pool (default zram:4GiB; needs root)")
        parser.add_argument(
            "--replay-daemon-args",
            default=None,
            help="extra flags for every run's daemon, quoted (default --prewarm none "
            "--pool-memory 16GiB --reclaim-mode vanilla)",
        )
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        variants = [v.strip() for v in str(s["variants"]).split(",") if v.strip()]
        idle_s, keep_alive_s = parse_seconds(s["idle"]), parse_seconds(s["keep_alive"])
        if keep_alive_s <= idle_s:
            raise ValueError(
                f"--keep-alive {s['keep_alive']} must outlast --idle {s['idle']}: the wake request "
                "has to find the instance alive"
            )
        selected = manifest.select(str(s["function"]), manifest.load_all(ctx.functions_dir))
        if len(selected) != 1:
            raise ValueError(f"--function {s['function']} selects {len(selected)} functions; name exactly one")
        spec = selected[0]
        schedule = semiwarm.pattern(spec.name, int(s["burst"]), parse_seconds(s["gap"]), idle_s, int(s["cycles"]))
        check_prerequisites(flags(s, variants[0]))
        config = {
            "function": spec.name,
            "burst": int(s["burst"]),
            "gap_s": parse_seconds(s["gap"]),
            "idle_s": idle_s,
            "cycles": int(s["cycles"]),
            "keep_alive_s": keep_alive_s,
            "variants": variants,
            "daemon_args": flags(s, "VARIANT"),
            "failed": {},
        }
        results: dict[str, dict] = {}
        for variant in variants:
            label = semiwarm.variant_label(variant)
            replay = Replay(
                recipe=self.name,
                label=label,
                specs=[spec],
                schedule=schedule,
                daemon_args=flags(s, variant),
                size=s["input"],
                tail_s=parse_seconds(s["tail"]),
                sample_period_s=ctx.session.sampler.period_s,
                config={"semiwarm": variant},
            )
            entry = await attempt(label, self._one(replay, ctx, spec.name), config["failed"], ctx.log)
            if entry is None:
                continue
            results[variant] = entry
            wakes = ", ".join(f"{p['wake']['latency_ms']} ms ({p['wake']['start_kind']})" for p in entry["periods"])
            ctx.log(f"[{label}] local memory {entry['local_mean_mib']} MiB (mean); wake requests: {wakes}")
            ctx.run_dir.write_json("summary.json", semiwarm.summary(config, results))
        if config["failed"]:
            ctx.session.result["failed"] = config["failed"]
        return semiwarm.summary(config, results)

    async def _one(self, replay: Replay, ctx: RecipeContext, function: str) -> dict:
        path = await run_replay(replay, ctx.run_dir.path / "runs" / replay.label, command=command_line(), log=ctx.log)
        return semiwarm.analyse_run(path, function)

    def render(self, out: Path, summary: dict) -> list[Path]:
        return semiwarm_render.render(out, summary)
