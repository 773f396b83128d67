"""Recipe `isolates-memory`: the isolates thesis' Table 4.1 / Figs. 4.1–4.4 for the Node.js
sharing modes. Protocol: isolates_eval/memory_run.py; analysis: isolates_eval/memory.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import manifest
from ..client import IceboxError
from ..frozen_garbage.baseline import start_companion, stop_companion
from ..isolates_eval import memory, memory_render
from ..isolates_eval.memory_run import MemoryPlan, measure_mode
from ..isolates_eval.options import int_list, isolate_settings, mode_list
from . import register
from .base import Recipe, RecipeContext


@register
class IsolatesMemory(Recipe):
    name = "isolates-memory"
    description = "action memory with n = 1..16 activations in flight per sharing mode, fitted as base + increment"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--functions", default=None, help="comma list (default filehash,rest-login,memalloc,image)")
        parser.add_argument("--modes", default=None, help="comma list of process,shared,isolate (default all)")
        parser.add_argument("--levels", default=None, help="concurrency levels (default 1,2,4,8,16)")
        parser.add_argument("--hold", type=float, default=None, help="seconds measured per level (default 3)")
        parser.add_argument("--warmup", type=float, default=None, help="seconds of warm-up per level (default 1)")
        parser.add_argument(
            "--measure", choices=("pss", "uss", "rss"), default=None, help="memory measure (default pss)"
        )
        parser.add_argument("--input", choices=("A", "B"), default=None)

    def plan(self, s: dict) -> MemoryPlan:
        return MemoryPlan(
            levels=int_list(s["levels"]),
            measure=str(s["measure"]),
            memory_mb=int(s["memory_mb"]) if s.get("memory_mb") else None,
            isolate=isolate_settings(s),
            warmup_s=float(s["warmup"]),
            hold_s=float(s["hold"]),
            sample_period_s=float(s["sample_every"]),
            size=str(s["input"]),
        )

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        plan = self.plan(s)
        modes = mode_list(s["modes"])
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        functions: dict[str, dict] = {}
        self._failed: dict[str, str] = {}
        raw: dict[str, dict] = {}
        invocations = ctx.session.invocations
        samples = ctx.run_dir.jsonl("samples.jsonl")
        companion = None
        try:
            if specs:
                # Node's own libraries stay mapped by another process whatever the mode, so PSS
                # and USS do not depend on how many instances of the runtime a mode starts.
                companion = await start_companion(ctx.client, specs[0].language, specs[0].kind, None)
            for spec in specs:
                raw[spec.name] = {}
                for mode in modes:
                    try:
                        raw[spec.name][mode] = await measure_mode(
                            ctx.client, spec, mode, plan, invocations=invocations, samples=samples, log=ctx.log
                        )
                    except (IceboxError, RuntimeError, ValueError) as e:
                        self._failed[f"{spec.name}/{mode}"] = str(e)
                        ctx.log(f"error: {spec.name}/{mode}: {e}")
                functions[spec.name] = memory.function_entry(raw[spec.name])
                self._log_function(ctx, spec.name, functions[spec.name])
                ctx.run_dir.write_json("summary.json", memory.summary(plan.measure, plan.levels, functions))
                ctx.run_dir.write_json(
                    "details.json", {"plan": plan.__dict__, "raw": raw, "failed": self._failed, "companion": companion}
                )
        finally:
            if companion is not None:
                await stop_companion(ctx.client, specs[0].language)
        if self._failed:
            ctx.session.result["failed"] = self._failed
        return memory.summary(plan.measure, plan.levels, functions)

    @staticmethod
    def _log_function(ctx: RecipeContext, name: str, entry: dict) -> None:
        for mode, e in entry["modes"].items():
            f = e["fit"]
            ctx.log(
                f"{name}/{mode}: base {f['base_mb']} MiB, increment {f['increment_mb']} MiB (slope {f['slope_mb']})"
            )
        if "isolate_over_process_at_8" in entry:
            ctx.log(
                f"{name}: isolate/process at n=8 {entry['isolate_over_process_at_8']}, "
                f"crossover {entry.get('crossover')}"
            )

    def render(self, out: Path, summary: dict) -> list[Path]:
        failed = getattr(self, "_failed", None)
        if failed is None and (out / "details.json").is_file():
            failed = json.loads((out / "details.json").read_text()).get("failed")
        return memory_render.render(out, summary, failed)
