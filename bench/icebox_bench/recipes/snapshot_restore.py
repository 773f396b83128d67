"""Recipe `snapshot-restore`: cold starts restored from process snapshots per restore mode
(eager, lazy, reap, faasnap), the snapshot page-cache-cold or cached, against a normal start
(issue 11; FaaSnap §6). Protocol: snapshot_eval/run.py; analysis: snapshot_eval/analysis.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..client import IceboxError
from ..manifest import ManifestError
from ..snapshot_eval import analysis, functions, locate, render
from ..snapshot_eval.run import MODES, VARIANTS, ProtocolError, measure_function
from . import register
from .base import Recipe, RecipeContext


def _choices(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    chosen = [t.strip() for t in str(text).split(",") if t.strip()]
    bad = [c for c in chosen if c not in allowed]
    if bad or not chosen:
        raise ValueError(f"--{what}: expected a comma list of {', '.join(allowed)}, got {text!r}")
    return chosen


@register
class SnapshotRestore(Recipe):
    name = "snapshot-restore"
    description = "cold start from a snapshot per restore mode, page-cache-cold and cached, vs a normal start"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--functions", default=None, help="comma list of manifest functions and nodejs-hello, java-hello"
        )
        parser.add_argument("--modes", default=None, help=f"comma list of {','.join(MODES)} (default all)")
        parser.add_argument("--variants", default=None, help="cold, cached or both (default both)")
        parser.add_argument("--repetitions", type=int, default=None, help="cold starts per cell (default 5)")
        parser.add_argument(
            "--memory-settle",
            type=float,
            default=None,
            dest="memory_settle_s",
            help="seconds between the answer and the memory reading (default 0.5)",
        )
        parser.add_argument(
            "--state-dir",
            default=None,
            help="the daemon's --state-dir, where to look for a snapshot's files if its restores do not "
            "name them (restore_stats.snapshot); the daemon must run on this machine",
        )

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        modes = _choices(s["modes"], MODES, "modes")
        variants = _choices(s["variants"], VARIANTS, "variants")
        rounds = int(s["repetitions"])
        if rounds < 1:
            raise ValueError("--repetitions must be at least 1")
        specs = functions.select(str(s["functions"]), ctx.functions_dir)
        state = s.get("state_dir") or None
        health = await ctx.client.health()
        process = next((i for i in health.get("isolations") or [] if i.get("isolation") == "process"), {})
        if not process.get("snapshots"):
            raise ProtocolError(
                "this daemon takes no process snapshots (root, crun and CRIU >= 4.1 needed; "
                "scripts/setup.sh builds CRIU into .tools/criu)"
            )
        config = {
            "functions": [f.name for f in specs],
            "modes": modes,
            "variants": variants,
            "repetitions": rounds,
            "memory_settle_s": float(s["memory_settle_s"]),
            "record_input": "A",
            "test_input": "B",
        }
        samples: dict[str, list[dict]] = {}
        snapshots: dict[str, dict] = {}
        failed: dict[str, str] = {}
        writer = ctx.run_dir.jsonl("samples.jsonl")
        for spec in specs:
            ctx.log(f"{spec.name}: deploying {len(modes)} snapshot actions and a normal one")
            try:
                samples[spec.name], snapshots[spec.name] = await measure_function(
                    ctx.client,
                    spec,
                    modes,
                    variants,
                    rounds,
                    state,
                    float(s["memory_settle_s"]),
                    writer,
                    ctx.session.invocations,
                    ctx.log,
                )
            except (ProtocolError, IceboxError, ManifestError, locate.LocateError, OSError) as e:
                failed[spec.name] = str(e)
                ctx.log(f"error: {spec.name}: {e}")
            # Written after every function: an interrupted run keeps what it measured.
            ctx.run_dir.write_json("summary.json", analysis.summary(config, samples, snapshots, failed))
        if failed:
            ctx.session.result["failed"] = failed
        result = analysis.summary(config, samples, snapshots, failed)
        for t in result["targets"]:
            ctx.log(f"target {t['function']}: {t['target']}: {t['value']:.2f}x {'met' if t['met'] else 'missed'}")
        return result

    def render(self, out: Path, summary: dict) -> list[Path]:
        return render.render(out, summary)
