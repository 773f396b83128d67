"""Recipe `desiccant-fig8`: Desiccant §5.2 (Fig. 8). See desiccant_eval/fig8_run.py for the
protocol and docs/bench.md for summary.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import manifest
from ..desiccant_eval import fig8, fig8_render
from ..desiccant_eval.fig8_run import measure
from . import register
from .base import Recipe, RecipeContext


@register
class DesiccantFig8(Recipe):
    name = "desiccant-fig8"
    description = "per-instance RSS and PSS with 1..k concurrent instances of one function, vanilla vs desiccant"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--function", default=None, help="the function (default fft, as the paper)")
        parser.add_argument("--max-instances", type=int, default=None, help="largest number of instances (default 8)")
        parser.add_argument("--iterations", type=int, default=None, help="invocations per instance (default 100)")
        parser.add_argument("--input", choices=("A", "B"), default=None, help="input size (default A)")

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        iterations, max_instances = int(s["iterations"]), int(s["max_instances"])
        if iterations < 1 or max_instances < 1:
            raise ValueError("--iterations and --max-instances must be at least 1")
        specs = manifest.select(str(s["function"]), manifest.load_all(ctx.functions_dir))
        if len(specs) != 1:
            raise ValueError(f"--function must name one function, not {s['function']!r}")
        if not ctx.own_daemon:
            ctx.log("note: using an external iceboxd: other instances of the same runtime change PSS")
        spec = specs[0]
        memories = await measure(
            ctx.client,
            spec,
            max_instances,
            iterations,
            s["input"],
            invocations=ctx.session.invocations,
            exits=ctx.run_dir.jsonl("exits.jsonl"),
            reclaims=ctx.run_dir.jsonl("reclaims.jsonl"),
            log=ctx.log,
        )
        points = [fig8.point(k, memories["vanilla"][k], memories["desiccant"][k]) for k in range(1, max_instances + 1)]
        for p in points:
            ctx.log(f"{p['instances']} instance(s): RSS {p['rss_improvement']:.2f}x, PSS {p['pss_improvement']:.2f}x")
        return fig8.summary(spec.name, iterations, points)

    def render(self, out: Path, summary: dict) -> list[Path]:
        return fig8_render.render(out, summary)
