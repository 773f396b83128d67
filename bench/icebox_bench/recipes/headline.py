"""Recipe `headline` (issue 21 §3): the busiest hour of the Azure 2019 sample, scaled to this
node and mapped onto >= 20 Python, Node.js and Java functions, replayed open loop on a fresh
iceboxd per mode (headline_eval/): warm instances per GiB, cold starts, latency, local memory,
and the issue's goals as ratios measured in the same run."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from .. import manifest, paths
from ..commands.replay_cmd import resolve_trace
from ..headline_eval import metrics, modes, render, workload
from ..headline_eval.run import Replay, run_mode
from ..units import parse_bytes, parse_seconds
from . import register
from .base import Recipe, RecipeContext
from .sim_validate import trace_window

QUICK_KEYS = ("replay_s", "max_rate", "max_functions", "max_per_function", "tail_s")


@register
class Headline(Recipe):
    name = "headline"
    description = "the busiest Azure 2019 hour on openwhisk, icebox-default, each technique alone and auto"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--quick",
            action="store_const",
            const=True,
            default=None,
            help="a short replay with fewer functions (<= 5 minutes)",
        )
        parser.add_argument("--modes", default=None, help="all, or a comma list of " + ", ".join(modes.ALL))
        parser.add_argument("--pool-memory", default=None, help="the node's instance budget (default 2GiB)")
        parser.add_argument("--replay-s", type=float, default=None, help="replay length of the hour (default 150)")
        parser.add_argument("--max-rate", type=float, default=None, help="invocations per replay second kept")
        parser.add_argument("--max-functions", type=int, default=None, help="trace functions kept at most")
        parser.add_argument("--functions", default=None, help="benchmark functions (>= 20, every runtime)")
        parser.add_argument("--trace", default=None, help="trace (default azure2019-sample500)")
        parser.add_argument("--seed", type=int, default=None)

    def settings(self, args: argparse.Namespace, config: dict) -> dict:
        """--quick takes the `quick_*` defaults; options given on the command line still win."""
        settings = dict(config.get("defaults", {}))
        if getattr(args, "quick", None):
            for key in QUICK_KEYS:
                settings[key] = settings[f"quick_{key}"]
        for key in self.option_names():
            value = getattr(args, key, None)
            if value is not None:
                settings[key] = value
        return settings

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        workload.check_functions(specs, int(s["min_functions"]))
        by_name = {x.name: x for x in specs}
        start, trace = trace_window(resolve_trace(str(s["trace"])), 60, str(s["expansion"]), int(s["seed"]))
        w = workload.plan(
            trace.invocations,
            start,
            specs,
            replay_s=float(s["replay_s"]),
            max_rate=float(s["max_rate"]),
            max_functions=int(s["max_functions"]),
            max_per_function=int(s["max_per_function"]),
            seed=int(s["seed"]),
        )
        runtimes = w.runtime_counts(by_name)
        ctx.log(
            f"busiest hour from minute {start}: {len(trace.invocations)} invocations of "
            f"{len({i.function for i in trace.invocations})} functions; kept {len(w.kept)} functions, "
            f"{len(w.invocations)} invocations, replayed at speed {w.speed:g} ({runtimes})"
        )
        scaled = modes.Scaled(
            keep_alive_ms=workload.scaled_ms(parse_seconds(str(s["keep_alive"])), w.speed),
            hybrid_bin_ms=workload.scaled_ms(parse_seconds(str(s["hybrid_bin"])), w.speed),
            semiwarm_start_ms=workload.scaled_ms(parse_seconds(str(s["semiwarm_start"])), w.speed),
        )
        help_text = subprocess.run(
            [str(paths.iceboxd_binary()), "--help"], capture_output=True, text=True, check=True
        ).stdout
        names = modes.mode_list(str(s["modes"]), help_text, log=ctx.log)
        common = [
            "--pool-memory",
            str(s["pool_memory"]),
            "--max-instances",
            str(s["max_instances"]),
            "--pids-max",
            str(s["pids_max"]),
        ]
        nice = int(s["nice"])
        if nice < 0:
            # The driver too: its schedule lag must not grow behind other work on the machine.
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        replay = Replay(
            w,
            by_name,
            str(s["input"]),
            float(s["tail_s"]),
            str(s["zram"]),
            str(s["swapfile"]),
            nice=nice,
            cpu_tasks=int(s["cpu_tasks"]),
        )
        actions = {a for a, _ in w.actions.values()}
        budget = parse_bytes(str(s["pool_memory"]))
        results: dict[str, dict] = {}
        failed: dict[str, str] = {}
        for name in names:
            m = modes.mode(name, scaled, common)
            ctx.log(f"{name}: iceboxd {' '.join(m.args)}")
            try:
                r = await run_mode(m, replay, ctx.run_dir.path / name, log=ctx.log)
            except Exception as e:  # one mode failing must not lose the others
                failed[name] = str(e)
                ctx.log(f"error: {name}: {e}")
                continue
            got = metrics.summarize(r["samples"], r["records"], actions, budget, r["horizon_s"])
            got.update(
                daemon_cpu_s=r["daemon_cpu_s"],
                machine_busy_share=r["busy_share"],
                loadavg_1m=[round(r["loadavg_1m_start"], 2), round(r["loadavg_1m_end"], 2)],
                lag_ms=r["lag_ms"],
                aborted=r["aborted"],
                pool=r["pool"],
                cpu_weight_files=r["cpu_weight_files"],
                daemon_args=m.args,
            )
            results[name] = got
            render.write_series(ctx.run_dir.path / name, r["samples"], actions)
            ctx.log(
                f"{name}: warm held mean {got['warm_instances_mean']} peak {got['warm_instances_peak']}, "
                f"{got['instances_per_gib']}/GiB, cold {got['cold_starts']} ({got['cold_start_fraction']}), "
                f"p50/p95/p99 {got['p50_ms']}/{got['p95_ms']}/{got['p99_ms']} ms, local "
                f"{got['local_memory_mib']} MiB, daemon CPU {got['daemon_cpu_s']} s, machine busy "
                f"{got['machine_busy_share']} (load {got['loadavg_1m']})"
            )
        goals = metrics.verdicts(results, techniques=modes.TECHNIQUES)
        for g in goals:
            verdict = {True: "met", False: "MISSED", None: "not measured"}[g["met"]]
            ctx.log(f"goal {g['goal']}: {g['value']} (target {g['target']}): {verdict}")
        if failed:
            ctx.session.result["failed"] = failed
        return {
            "trace": str(s["trace"]),
            "quick": bool(s.get("quick")),
            "window_start_min": start,
            "window_min": 60,
            "speed": round(w.speed, 4),
            "replay_s": float(s["replay_s"]),
            "tail_s": float(s["tail_s"]),
            "trace_functions": len(w.kept),
            "max_per_function": int(s["max_per_function"]),
            "invocations": len(w.invocations),
            "actions_per_runtime": runtimes,
            "benchmark_functions": [x.name for x in specs],
            "pool_memory": str(s["pool_memory"]),
            "max_instances": int(s["max_instances"]),
            "nice": nice,
            "cpu_tasks": int(s["cpu_tasks"]),
            "keep_alive_ms": scaled.keep_alive_ms,
            "hybrid_bin_ms": scaled.hybrid_bin_ms,
            "semiwarm_start_ms": scaled.semiwarm_start_ms,
            "offload_pool": f"zram:{s['zram']}+swapfile:<daemon dir>/offload.swap:{s['swapfile']}",
            "modes_run": list(results),
            "modes": results,
            "goals": goals,
            "failed": failed,
        }

    def render(self, out: Path, summary: dict) -> list[Path]:
        return render.render(out, summary)
