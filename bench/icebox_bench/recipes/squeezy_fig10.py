"""Recipe `squeezy-fig10`: Squeezy's Fig. 10 on the vm-shared backend — per function, p99
latency of a bursty trace slice with abundant and with limited host memory for partitions, per
memory mode, and the memory partitions held (GiB-s). Protocol: squeezy_eval/fig10_run.py;
analysis: squeezy_eval/fig10.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import manifest, vm_accel
from ..client import IceboxError
from ..commands.common import command_line
from ..commands.replay_cmd import resolve_trace
from ..daemon import DaemonError
from ..squeezy_eval import fig10, fig10_render
from ..squeezy_eval.fig10_run import MIB, Plan, load_run, pick_bursty, pressure_budget, run_scenario
from ..traces import Window, open_trace
from . import register
from .base import Recipe, RecipeContext


def _list(value) -> list[str]:
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def partition_bytes_of(run: dict, memory_mb: int) -> int:
    """What a partition plugged in the run (the block-rounded limit), else the action's limit."""
    for e in run.get("events") or []:
        if e.get("kind") == "partition_plugged":
            d = fig10._detail(e)
            if d.get("bytes"):
                return int(d["bytes"])
    return memory_mb * MIB


@register
class SqueezyFig10(Recipe):
    name = "squeezy-fig10"
    description = "Squeezy Fig. 10: p99 per function with abundant vs limited partition memory, per memory mode"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--functions", default=None, help="comma list of Python functions")
        parser.add_argument("--modes", default=None, help="comma list of squeezy,virtio-mem,balloon")
        parser.add_argument("--scenarios", default=None, help="abundant and/or pressure")
        parser.add_argument("--trace", default=None, help="2019-format trace directory (or a name under traces/)")
        parser.add_argument(
            "--trace-functions", default=None, help="comma list of trace function hashes (default: the burstiest)"
        )
        parser.add_argument("--start-minute", type=int, default=None, help="first trace minute of the slice")
        parser.add_argument("--minutes", type=int, default=None, help="trace minutes in the slice")
        parser.add_argument("--scale", type=float, default=None, help="replay this many times faster")
        parser.add_argument("--duration", type=float, default=None, help="cut the replay after this many seconds")
        parser.add_argument(
            "--pressure-fraction",
            type=float,
            default=None,
            help="--vm-memory of a pressure run: this share of the abundant run's peak",
        )
        parser.add_argument("--partitions", type=int, default=None, help="--vm-partitions")
        parser.add_argument("--keep-alive", default=None, help="--keep-alive of every run's daemon")
        parser.add_argument("--memory-mb", type=int, default=None, help="memory limit of every action")
        parser.add_argument("--accel", default=None, help="--vm-accel: auto, kvm or tcg")

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        specs = manifest.select(",".join(_list(s["functions"])), manifest.load_all(ctx.functions_dir))
        modes = _list(s["modes"])
        scenarios = [x for x in fig10.SCENARIOS if x in _list(s["scenarios"])]
        unknown = [m for m in modes if m not in fig10.MODES]
        if unknown or not scenarios:
            raise ValueError(f"modes must be among {fig10.MODES} (got {unknown}) and scenarios among {fig10.SCENARIOS}")
        start, minutes = int(s["start_minute"]), int(s["minutes"])
        trace = open_trace(resolve_trace(str(s["trace"])), window=Window(start * 60.0, (start + minutes) * 60.0))
        picked = _list(s.get("trace_functions") or "") or pick_bursty(
            trace, start, minutes, len(specs), min_peak=int(s["min_peak"]), max_peak=int(s["max_peak"])
        )
        if not picked:
            raise ValueError("no trace function in the slice fits min_peak..max_peak")
        mapping = {tf: specs[i % len(specs)].name for i, tf in enumerate(picked)}
        ctx.run_dir.write_json("mapping.json", mapping)
        partitions, memory_mb = int(s["partitions"]), int(s["memory_mb"])
        accel = vm_accel.resolve(s.get("accel"))
        daemon_args = [
            *[str(a) for a in s["daemon_args"]],
            "--vm-accel",
            str(s["accel"]),
            "--vm-partitions",
            str(partitions),
            "--keep-alive",
            str(s["keep_alive"]),
        ]
        plan = Plan(
            specs=specs,
            trace=trace,
            mapping=mapping,
            origin_s=start * 60.0,
            scale=float(s["scale"]),
            duration_s=float(s["duration"]) if s.get("duration") else minutes * 60.0 / float(s["scale"]),
            memory_mb=memory_mb,
            size=str(s["input"]),
            daemon_args=daemon_args,
            drain_timeout_s=float(s["drain_timeout"]),
            tail_s=float(s["tail"]),
            extra={"trace": str(s["trace"]), "partitions": partitions, "keep_alive": str(s["keep_alive"])},
        )
        functions = sorted(set(mapping.values()), key=[x.name for x in specs].index)
        config = {
            "mapping": mapping,
            "scale": plan.scale,
            "duration_s": plan.duration_s,
            "memory_mb": memory_mb,
            "partitions": partitions,
            "keep_alive": str(s["keep_alive"]),
            "daemon_args": daemon_args,
            "pressure_fraction": float(s["pressure_fraction"]),
            "trace": str(s["trace"]),
            "start_minute": start,
            "minutes": minutes,
            "scheduled": len(plan.schedule().items),
        }
        ctx.log(
            f"replaying {config['scheduled']} invocations of {len(picked)} trace functions "
            f"({', '.join(f'{k[:8]}->{v}' for k, v in mapping.items())}) over {plan.duration_s:.0f} s per run"
        )
        runs: list[dict] = []
        failed: dict[str, str] = {}

        def current() -> dict:
            return fig10.summary(runs, functions=functions, modes=modes, accel=accel, failed=failed, config=config)

        for mode in modes:
            peak = None
            part = memory_mb * MIB
            for scenario in scenarios:
                budget = None
                if scenario == "pressure":
                    base = peak if peak else partitions * len(functions) * part
                    budget = pressure_budget(base, float(s["pressure_fraction"]), part)
                    ctx.log(
                        f"{mode}: pressure budget {budget // MIB} MiB "
                        f"({'of the abundant peak' if peak else 'of partitions x functions'})"
                    )
                out = ctx.run_dir.path / "runs" / f"{mode}-{scenario}"
                try:
                    path = await run_scenario(plan, mode, scenario, budget, out, command=command_line(), log=ctx.log)
                    run = load_run(path, mode, scenario, part)
                    part = partition_bytes_of(run, memory_mb)
                    run["partition_bytes"] = part
                    runs.append(run)
                    if scenario == "abundant":
                        peak = fig10.memory_entry(run)["peak_bytes_run"]
                    if run.get("error"):
                        failed[f"{mode}/{scenario}"] = str(run["error"])
                except (IceboxError, DaemonError, RuntimeError, ValueError, OSError) as e:
                    failed[f"{mode}/{scenario}"] = str(e)
                    ctx.log(f"error: {mode}/{scenario}: {e}")
                ctx.run_dir.write_json("summary.json", current())
        result = current()
        if failed:
            ctx.session.result["failed"] = failed
        for mode, r in result["ratios"].items():
            ctx.log(f"{mode}: p99 pressure / abundant {r['p99_ratio_mean']} (mean over functions)")
        for t in result["targets"]:
            ctx.log(f"target {t['target']}: {t['value']} {'met' if t['met'] else 'missed'} (paper {t['paper']})")
        return result

    def render(self, out: Path, summary: dict) -> list[Path]:
        return fig10_render.render(out, summary)
