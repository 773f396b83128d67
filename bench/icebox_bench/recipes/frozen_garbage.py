"""Recipe `frozen-garbage`: Desiccant §3.1 (Fig. 1 and 2). See frozen_garbage/measure.py for
the protocol and docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import manifest
from ..client import IceboxError
from ..frozen_garbage import analysis, render
from ..frozen_garbage.baseline import start_companion, stop_companion
from ..frozen_garbage.measure import MeasurementError, measure_function
from ..recorder import JsonlWriter
from . import register
from .base import Recipe, RecipeContext


@register
class FrozenGarbage(Recipe):
    name = "frozen-garbage"
    description = "real vs ideal (start-up + live heap) memory after each of n invocations in one instance"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--functions", default=None, help="function set: all, python, nodejs, java, or a comma list (default: all)"
        )
        parser.add_argument("--iterations", type=int, default=None, help="invocations per instance (default 100)")
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        if int(s["iterations"]) < 1:
            raise ValueError("--iterations must be at least 1")
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        if not ctx.own_daemon:
            ctx.log(
                "note: using an external iceboxd: its --keep-alive and --pool-memory must keep an instance "
                "alive for the whole sequence, or the run stops with an 'instance changed' error"
            )
        functions: dict[str, dict] = {}
        details: dict = {
            "method": {
                "startup_event": "runtime_ready",
                "ideal_instance": "separate",
                "bare_runtime": "no-op companion instance per language, kept alive",
                "iterations": int(s["iterations"]),
                "input": s["input"],
            },
            "baselines": {},
            "functions": {},
            "failed": {},
        }
        exits = ctx.run_dir.jsonl("exits.jsonl")
        try:
            for spec in specs:
                await self._measure(ctx, spec, details, functions, exits)
                # Written after every function: an interrupted run keeps what it measured.
                ctx.run_dir.write_json("summary.json", analysis.summary(functions))
                ctx.run_dir.write_json("details.json", details)
        finally:
            for language in details["baselines"]:
                await stop_companion(ctx.client, language)
        self._details = details
        if details["failed"]:
            ctx.session.result["failed"] = details["failed"]
        return analysis.summary(functions)

    async def _measure(
        self, ctx: RecipeContext, spec: manifest.FunctionSpec, details: dict, functions: dict, exits: JsonlWriter
    ) -> None:
        s = ctx.settings
        try:
            if spec.language not in details["baselines"]:
                # Before the language's first function: the companion must already map the
                # runtime's libraries when the measured instance starts (see baseline.py).
                details["baselines"][spec.language] = await start_companion(
                    ctx.client, spec.language, spec.kind, spec.memory_mb
                )
            m = await measure_function(
                ctx.client,
                ctx.session.events,
                spec,
                int(s["iterations"]),
                s["input"],
                baseline_live_bytes=details["baselines"][spec.language]["live_bytes"],
                invocations=ctx.session.invocations,
                exits=exits,
                log=ctx.log,
            )
        except (MeasurementError, IceboxError, manifest.ManifestError, FileNotFoundError) as e:
            details["failed"][spec.name] = str(e)
            ctx.log(f"error: {spec.name}: {e}")
            return
        functions[spec.name] = m.summary_entry()
        details["functions"][spec.name] = m.details()
        entry = functions[spec.name]
        ctx.log(f"{spec.name}: avg ratio {entry['avg_ratio']:.2f}, max ratio {entry['max_ratio']:.2f}")

    def render(self, out: Path, summary: dict) -> list[Path]:
        details = getattr(self, "_details", None)
        if details is None:  # rendering a finished run again
            details = json.loads((out / "details.json").read_text())
        return render.render(out, summary, details)
