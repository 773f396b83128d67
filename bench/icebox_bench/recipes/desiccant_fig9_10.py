"""Recipe `desiccant-fig9-10`: Desiccant §5.3 (Fig. 9 and 10). See desiccant_eval/fig9_10_run.py
for the protocol and docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path

from .. import manifest, mapping
from ..client import IceboxError
from ..commands.common import command_line
from ..commands.replay_cmd import resolve_trace
from ..daemon import DaemonError
from ..desiccant_eval import fig9_10, fig9_10_render
from ..desiccant_eval.actions import MODES
from ..desiccant_eval.fig9_10_run import Plan, analyse_run, profile_durations, run_label, run_one, trace_span_s
from ..report import write_report
from ..traces import Window, open_trace
from ..units import MIB, parse_seconds
from . import register
from .base import Recipe, RecipeContext


def _floats(text) -> list[float]:
    values = [float(x) for x in str(text).split(",") if x.strip()]
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"invalid scale list {text!r}: positive numbers separated by commas")
    return values


def _modes(text) -> list[str]:
    modes = [m.strip() for m in str(text).split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise ValueError(f"invalid --modes {text!r}: choose from {', '.join(MODES)}")
    return modes


def pool_memory(value) -> tuple[str, str]:
    """(the --pool-memory flag's value, how it was chosen)."""
    if str(value) != "auto":
        return str(value), "given"
    cores = os.cpu_count() or 1
    size = fig9_10.scaled_pool_bytes(cores) // MIB
    return f"{size}MiB", f"the paper's 2 GiB for 20 function CPUs x {cores} cores / 20"


@register
class DesiccantFig9And10(Recipe):
    name = "desiccant-fig9-10"
    description = "Azure trace replay under a memory budget: cold starts, tail latency, CPU per mode and scale"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--functions", default=None, help="benchmark functions (default nodejs,java: the paper's)")
        parser.add_argument("--trace", default=None, help="trace directory or name (default azure2019-sample100)")
        parser.add_argument("--window-start", default=None, help="trace time where the replay starts (default 480m)")
        parser.add_argument("--scales", default=None, help="scale factors, comma separated (default 5,10,15)")
        parser.add_argument("--modes", default=None, help="reclaim modes (default vanilla,eager,desiccant)")
        parser.add_argument("--warmup", default=None, help="warm-up per run, excluded (default 30s)")
        parser.add_argument(
            "--warmup-scale", type=float, default=None, help="scale factor of the warm-up (default: the run's)"
        )
        parser.add_argument("--duration", default=None, help="measured replay time per run (default 60s)")
        parser.add_argument(
            "--pool-memory",
            default=None,
            help="keep-alive budget of every replay daemon, e.g. 256MiB (default auto: 2 GiB x cores / 20)",
        )
        parser.add_argument("--memory-mb", type=int, default=None, help="memory limit per instance (default 256)")
        parser.add_argument(
            "--function-durations",
            default=None,
            help="JSON {function: ms} (icebox-bench profile) instead of measuring them first",
        )
        # Not --daemon-args: that one (the recipe's own daemon) belongs to `icebox-bench run`.
        parser.add_argument(
            "--replay-daemon-args",
            default=None,
            help="extra flags for every replay daemon, quoted (default --reclaim-frozen-after 1s)",
        )
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")

    async def _plan(self, ctx: RecipeContext) -> tuple[Plan, dict]:
        """The functions' durations, the mapping and everything every run shares; and the
        summary's `config`."""
        s = ctx.settings
        scales, modes = _floats(s["scales"]), _modes(s["modes"])
        warmup_s, duration_s = parse_seconds(s["warmup"]), parse_seconds(s["duration"])
        origin_s = parse_seconds(s["window_start"])
        pool, pool_rule = pool_memory(s["pool_memory"])
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        if s.get("function_durations"):
            durations = {k: float(v) for k, v in json.loads(Path(s["function_durations"]).read_text()).items()}
        else:
            ctx.log(f"measuring the warm durations of {len(specs)} functions (for the mapping)")
            durations = await profile_durations(
                ctx.client, specs, int(s["profile_runs"]), s["input"], invocations=ctx.session.invocations, log=ctx.log
            )
        ctx.run_dir.write_json("durations.json", durations)
        specs = [spec for spec in specs if spec.name in durations]
        warmup_scale = float(s["warmup_scale"]) if s.get("warmup_scale") else None
        span = trace_span_s(warmup_s, warmup_scale or max(scales), duration_s, scales)
        trace = open_trace(
            resolve_trace(str(s["trace"])),
            window=Window(origin_s, origin_s + span),
            expansion=s["expansion"],
            seed=int(s["seed"]),
        )
        mapped = mapping.map_functions(
            "duration",
            trace.functions,
            trace.durations_ms,
            [x.name for x in specs],
            seed=int(s["seed"]),
            bench_durations=durations,
        )
        ctx.run_dir.write_json("mapping.json", mapped)
        plan = Plan(
            specs=specs,
            trace=trace,
            trace_name=str(s["trace"]),
            mapping=mapped,
            origin_s=origin_s,
            warmup_s=warmup_s,
            warmup_scale=warmup_scale,
            duration_s=duration_s,
            memory_mb=int(s["memory_mb"]),
            size=s["input"],
            daemon_args=["--pool-memory", pool, *shlex.split(str(s.get("replay_daemon_args") or ""))],
            drain_timeout_s=float(s["drain_timeout"]),
        )
        config = {
            "trace": str(s["trace"]),
            "window_start_s": origin_s,
            "warmup_s": warmup_s,
            "warmup_scale": warmup_scale,
            "duration_s": duration_s,
            "scales": scales,
            "modes": modes,
            "memory_mb": plan.memory_mb,
            "pool_memory": pool,
            "pool_memory_rule": pool_rule,
            "daemon_args": plan.daemon_args,
            "mapping": mapped,
            "durations_ms": durations,
            "failed": {},
        }
        return plan, config

    async def run(self, ctx: RecipeContext) -> dict:
        plan, config = await self._plan(ctx)
        runs: dict[str, dict] = {mode: {} for mode in config["modes"]}
        done: list[Path] = []
        for scale in config["scales"]:
            for mode in config["modes"]:
                label = run_label(mode, scale)
                try:
                    path = await run_one(
                        plan, mode, scale, ctx.run_dir.path / "runs" / label, command=command_line(), log=ctx.log
                    )
                    runs[mode][fig9_10.scale_key(scale)] = entry = analyse_run(path)
                except (IceboxError, DaemonError, OSError, ValueError) as e:
                    config["failed"][label] = str(e)
                    ctx.log(f"error: {label}: {e}")
                    continue
                done.append(path)
                config["cpu_method"] = (entry.get("cpu") or {}).get("method")
                ctx.log(
                    f"[{label}] cold starts {100 * (entry['cold_start_rate'] or 0):.1f}%, "
                    f"{entry['throughput_per_s']}/s, p99 {entry['latency_ms']['p99']} ms, "
                    f"CPU {(entry.get('cpu') or {}).get('cores')} cores, "
                    f"{entry['evictions'].get('memory_budget', 0)} budget evictions, {entry['reclaims']} reclaims"
                )
                # After every run: an interrupted experiment keeps what it measured.
                ctx.run_dir.write_json("summary.json", fig9_10.summary(config, runs))
        if done:
            write_report(done, ctx.run_dir.path / "report")
        if config["failed"]:
            ctx.session.result["failed"] = config["failed"]
        return fig9_10.summary(config, runs)

    def render(self, out: Path, summary: dict) -> list[Path]:
        return fig9_10_render.render(out, summary)
