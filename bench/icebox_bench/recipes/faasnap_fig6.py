"""Recipe `faasnap-fig6`: FaaSnap's Fig. 6 (Ao et al., EuroSys '22) on the `vm` backend — cold
invocations served by VM snapshot restores, per function, in lazy (cold page cache), REAP,
FaaSnap and cached modes. Protocol: faasnap_eval/fig6_run.py; analysis: faasnap_eval/fig6.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import manifest, vm_accel
from ..client import IceboxError
from ..faasnap_eval import fig6, fig6_render
from ..faasnap_eval.fig6_run import run_function
from . import register
from .base import Recipe, RecipeContext


def _list(value) -> list[str]:
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


@register
class FaasnapFig6(Recipe):
    name = "faasnap-fig6"
    description = "FaaSnap Fig. 6 on VM snapshots: lazy vs REAP vs FaaSnap vs cached restores per function"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--functions", default=None, help="comma list of Python functions")
        parser.add_argument("--modes", default=None, help="comma list of lazy,reap,faasnap,cached")
        parser.add_argument("--repetitions", type=int, default=None, help="timed invocations per function and mode")
        parser.add_argument("--panels", default=None, help="A->B (record A, test B) and/or B->A, comma separated")
        parser.add_argument(
            "--snapshot",
            choices=("warm", "init"),
            default=None,
            help="snapshot after /init and one run with the record input (warm), or after /init",
        )
        parser.add_argument(
            "--state-dir",
            default=None,
            help="the daemon's state directory, with --apihost (to drop its snapshot files from the page cache)",
        )

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        state_dir = ctx.state_dir or (Path(s["state_dir"]) if s.get("state_dir") else None)
        if state_dir is None:
            raise IceboxError(
                "faasnap-fig6 must reach the daemon's snapshot files: run it with its own daemon, "
                "or pass --state-dir with --apihost"
            )
        specs = manifest.select(",".join(_list(s["functions"])), manifest.load_all(ctx.functions_dir))
        modes = _list(s["modes"])
        unknown = [m for m in modes if m not in fig6.MODES]
        if unknown:
            raise ValueError(f"unknown modes {unknown}; known: {', '.join(fig6.MODES)}")
        panels = [p.replace(" ", "") for p in _list(s["panels"])]
        samples: list[dict] = []
        records: list[dict] = []
        failed: dict[str, str] = {}
        functions = [spec.name for spec in specs]
        for panel in panels:
            record_input, test_input = panel.split("->")
            for spec in specs:
                ctx.log(f"{spec.name}: panel {panel}")
                try:
                    got, recs = await run_function(
                        ctx.client,
                        state_dir,
                        spec,
                        modes=modes,
                        record_input=record_input,
                        test_input=test_input,
                        repetitions=int(s["repetitions"]),
                        snapshot=str(s["snapshot"]),
                        panel=panel,
                        log=ctx.log,
                    )
                    samples += got
                    records += recs
                except (IceboxError, RuntimeError, ValueError) as e:
                    failed[f"{spec.name} {panel}"] = str(e)
                    ctx.log(f"error: {spec.name} {panel}: {e}")
                partial = fig6.summary(
                    samples,
                    functions,
                    modes,
                    panels,
                    accel=vm_accel.resolve(s.get("accel")),
                    records=records,
                    failed=failed,
                )
                ctx.run_dir.write_json("summary.json", partial)
        if failed:
            ctx.session.result["failed"] = failed
        result = fig6.summary(
            samples, functions, modes, panels, accel=vm_accel.resolve(s.get("accel")), records=records, failed=failed
        )
        o = result["overall"]
        ctx.log(
            f"overall: faasnap vs lazy {o['faasnap_vs_lazy']}, faasnap / cached {o['faasnap_vs_cached']}, "
            f"faasnap vs reap {o['faasnap_vs_reap']}"
        )
        for t in result["targets"]:
            ctx.log(f"target {t['target']}: {t['value']} {'met' if t['met'] else 'missed'} (paper {t['paper']})")
        if result["note"]:
            ctx.log(result["note"])
        return result

    def render(self, out: Path, summary: dict) -> list[Path]:
        return fig6_render.render(out, summary)
