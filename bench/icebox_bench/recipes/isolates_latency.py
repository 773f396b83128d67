"""Recipe `isolates-latency`: memalloc's latency per sharing mode (isolates thesis Fig. 4.8),
isolate start times, and the memory an isolate's teardown returns. Protocol:
isolates_eval/latency_run.py; analysis: isolates_eval/latency.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import manifest
from ..client import IceboxError
from ..isolates_eval import latency, latency_render
from ..isolates_eval.latency_run import measure_mode, measure_starts, measure_teardown
from ..isolates_eval.options import int_list, isolate_settings, mode_list
from . import register
from .base import Recipe, RecipeContext


@register
class IsolatesLatency(Recipe):
    name = "isolates-latency"
    description = "memalloc p50/p99 per sharing mode and concurrency, isolate start times, teardown"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--function", default=None, help="the function measured (default memalloc)")
        parser.add_argument("--modes", default=None, help="comma list of process,shared,isolate (default all)")
        parser.add_argument("--levels", default=None, help="concurrency levels (default 1,2,4,8)")
        parser.add_argument(
            "--measure-seconds", type=float, default=None, help="measured seconds per level (default 10)"
        )
        parser.add_argument("--warmup", type=float, default=None, help="warm-up seconds per level (default 2)")
        parser.add_argument("--hold-mb", type=int, default=None, help="MiB the torn-down isolate holds (default 64)")
        parser.add_argument("--input", choices=("A", "B"), default=None)

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        levels = int_list(s["levels"])
        spec = manifest.select(str(s["function"]), manifest.load_all(ctx.functions_dir))[0]
        memory_mb = int(s["memory_mb"]) if s.get("memory_mb") else None
        modes: dict[str, dict] = {}
        loaded = None
        self._failed: dict[str, str] = {}
        for mode in mode_list(s["modes"]):
            try:
                modes[mode], st = await measure_mode(
                    ctx.client,
                    spec,
                    mode,
                    levels,
                    warmup_s=float(s["warmup"]),
                    measure_s=float(s["measure_seconds"]),
                    memory_mb=memory_mb,
                    isolate=isolate_settings(s),
                    size=str(s["input"]),
                    invocations=ctx.session.invocations,
                    log=ctx.log,
                )
                loaded = st or loaded
            except (IceboxError, RuntimeError, ValueError) as e:
                self._failed[mode] = str(e)
                ctx.log(f"error: {spec.name}/{mode}: {e}")
            ctx.run_dir.write_json("summary.json", latency.summary(spec.name, levels, modes, None, None, loaded))
        starts = None
        if int(s["start_rounds"]) > 0:
            try:
                starts = await measure_starts(
                    ctx.client,
                    spec,
                    rounds=int(s["start_rounds"]),
                    memory_mb=memory_mb,
                    isolate=isolate_settings(s),
                    size=str(s["input"]),
                    log=ctx.log,
                )
            except (IceboxError, RuntimeError, ValueError) as e:
                self._failed["starts"] = str(e)
                ctx.log(f"error: isolate starts: {e}")
        down = None
        if int(s["hold_mb"]) > 0:
            try:
                down = await measure_teardown(
                    ctx.client,
                    spec.kind,
                    hold_mb=int(s["hold_mb"]),
                    isolate_memory_mb=int(s["teardown_isolate_memory_mb"]),
                    memory_mb=int(s["teardown_memory_mb"]),
                    variant=s.get("reclaim_variant") or None,
                    engine=isolate_settings(s)["engine"],
                    log=ctx.log,
                )
            except (IceboxError, RuntimeError, ValueError) as e:
                self._failed["teardown"] = str(e)
                ctx.log(f"error: teardown: {e}")
        if self._failed:
            ctx.session.result["failed"] = self._failed
        result = latency.summary(spec.name, levels, modes, starts, down, loaded)
        for t in result["targets"]:
            ctx.log(f"target {t['target']}: {t['value']} {'met' if t['met'] else 'missed'}")
        return result

    def render(self, out: Path, summary: dict) -> list[Path]:
        return latency_render.render(out, summary)
