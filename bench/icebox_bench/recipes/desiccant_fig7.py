"""Recipe `desiccant-fig7`: Desiccant §5.2 (Fig. 7). See desiccant_eval/fig7_run.py for the
protocol and docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import manifest
from ..client import IceboxError
from ..desiccant_eval import fig7, fig7_render
from ..desiccant_eval.actions import ProtocolError
from ..desiccant_eval.fig7_run import measure_function
from ..frozen_garbage.baseline import start_companion, stop_companion
from . import register
from .base import Recipe, RecipeContext


@register
class DesiccantFig7(Recipe):
    name = "desiccant-fig7"
    description = "memory after n invocations in one frozen instance: vanilla, eager, desiccant, ideal"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--functions",
            default=None,
            help="all, python, nodejs, java, or a comma list (default: all Java and Node.js, four Python)",
        )
        parser.add_argument("--iterations", type=int, default=None, help="invocations per instance (default 100)")
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        iterations = int(s["iterations"])
        if iterations < 1:
            raise ValueError("--iterations must be at least 1")
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        if not ctx.own_daemon:
            ctx.log(
                "note: using an external iceboxd: it must keep instances alive for the whole sequence and "
                "its policy must not reclaim them (a large --pool-memory)"
            )
        functions: dict[str, dict] = {}
        details: dict = {
            "method": {
                "iterations": iterations,
                "input": s["input"],
                "reclaim_variant": "runtime default",
                "bare_runtime": "no-op companion instance per language, kept alive",
            },
            "baselines": {},
            "functions": {},
            "failed": {},
        }
        exits = ctx.run_dir.jsonl("exits.jsonl")
        try:
            for spec in specs:
                try:
                    if spec.language not in details["baselines"]:
                        details["baselines"][spec.language] = await start_companion(
                            ctx.client, spec.language, spec.kind, spec.memory_mb
                        )
                    m = await measure_function(
                        ctx.client,
                        ctx.session.events,
                        spec,
                        iterations,
                        s["input"],
                        baseline_live_bytes=details["baselines"][spec.language]["live_bytes"],
                        invocations=ctx.session.invocations,
                        exits=exits,
                        log=ctx.log,
                    )
                    functions[spec.name] = m.summary_entry()
                except (ProtocolError, IceboxError, manifest.ManifestError, FileNotFoundError, ValueError) as e:
                    details["failed"][spec.name] = str(e)
                    ctx.log(f"error: {spec.name}: {e}")
                    continue
                details["functions"][spec.name] = m.details()
                r = fig7.ratios(functions[spec.name])
                ctx.log(
                    f"{spec.name}: vanilla/desiccant {r['vanilla_over_desiccant']:.2f}, "
                    f"eager/desiccant {r['eager_over_desiccant']:.2f}, "
                    f"desiccant/ideal {r['desiccant_over_ideal']:.2f}"
                )
                self._write(ctx, functions, details)
        finally:
            for language in details["baselines"]:
                await stop_companion(ctx.client, language)
        self._write(ctx, functions, details)
        self._details = details
        if details["failed"]:
            ctx.session.result["failed"] = details["failed"]
        return fig7.summary(functions)

    @staticmethod
    def _write(ctx: RecipeContext, functions: dict, details: dict) -> None:
        # After every function: an interrupted run keeps what it measured.
        summary = fig7.summary(functions)
        details["aggregates"] = fig7.aggregates(functions)
        details["targets"] = fig7.targets(summary)
        ctx.run_dir.write_json("summary.json", summary)
        ctx.run_dir.write_json("details.json", details)

    def render(self, out: Path, summary: dict) -> list[Path]:
        details = getattr(self, "_details", None)
        if details is None:  # rendering a finished run again
            details = json.loads((out / "details.json").read_text())
        return fig7_render.render(out, summary, details)
