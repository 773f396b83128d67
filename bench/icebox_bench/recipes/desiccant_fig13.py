"""Recipe `desiccant-fig13`: Desiccant §5.6 (Fig. 13). See desiccant_eval/fig13_run.py for the
protocol and docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import manifest
from ..client import IceboxError
from ..desiccant_eval import fig13, fig13_render
from ..desiccant_eval.actions import ProtocolError
from ..desiccant_eval.fig13_run import measure_function
from ..units import parse_seconds
from . import register
from .base import Recipe, RecipeContext


@register
class DesiccantFig13(Recipe):
    name = "desiccant-fig13"
    description = "execution time after a reclaim vs before it, per function and reclaim variant"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--functions",
            default=None,
            help="all, python, nodejs, java, or a comma list (default: a subset per language)",
        )
        parser.add_argument(
            "--before-runs", type=int, default=None, help="invocations before the reclaim (default 130)"
        )
        parser.add_argument("--window", type=int, default=None, help="invocations compared on each side (default 10)")
        parser.add_argument(
            "--variants",
            default=None,
            help="LANG=V1,V2;LANG=... variants besides the runtime's default (default: every variant of each runtime)",
        )
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")
        parser.add_argument(
            "--pause",
            default=None,
            help="time the reclaimed instance stays frozen before the runs after it (default 0s, the paper's protocol)",
        )

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        before_runs, window = int(s["before_runs"]), int(s["window"])
        pause_s = parse_seconds(str(s["pause"]))
        if pause_s < 0:
            raise ValueError("--pause must not be negative")
        variants = fig13.parse_variants(s["variants"])
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        functions: dict[str, dict] = {}
        failed: dict[str, str] = {}
        reclaims = ctx.run_dir.jsonl("reclaims.jsonl")
        for spec in specs:
            try:
                functions[spec.name] = await measure_function(
                    ctx.client,
                    spec,
                    variants.get(spec.language, []),
                    before_runs,
                    window,
                    s["input"],
                    invocations=ctx.session.invocations,
                    reclaims=reclaims,
                    log=ctx.log,
                    pause_s=pause_s,
                )
            except (ProtocolError, IceboxError, manifest.ManifestError, FileNotFoundError, ValueError) as e:
                failed[spec.name] = str(e)
                ctx.log(f"error: {spec.name}: {e}")
                continue
            ctx.log(
                f"{spec.name}: "
                + ", ".join(f"{v} {100 * e['slowdown']:+.1f}%" for v, e in functions[spec.name]["variants"].items())
            )
            # After every function: an interrupted run keeps what it measured.
            ctx.run_dir.write_json(
                "summary.json", fig13.summary(functions, before_runs=before_runs, window=window, pause_s=pause_s)
            )
        ctx.run_dir.write_json("failed.json", failed)
        if failed:
            ctx.session.result["failed"] = failed
        return fig13.summary(functions, before_runs=before_runs, window=window, pause_s=pause_s)

    def render(self, out: Path, summary: dict) -> list[Path]:
        failed_file = out / "failed.json"
        failed = json.loads(failed_file.read_text()) if failed_file.exists() else {}
        return fig13_render.render(out, summary, failed)
