"""Recipe `squeezy-fig5`: Squeezy's Fig. 5 (and Fig. 6's vanilla without zeroing) on the
vm-shared backend — how long taking one instance's memory back from an N:1 VM takes, per memory
mode, partition size and VM fullness. The measurement is the squeezy_reclaim example
(crates/icebox-vm/examples), run once per series without the daemon: the daemon's pool would
add its own scheduling to the very latency measured. Analysis: squeezy_eval/fig5.py."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import time
from pathlib import Path

from .. import vm_accel
from ..paths import REPO_ROOT
from ..squeezy_eval import fig5, fig5_render
from . import register
from .base import Recipe, RecipeContext

EXAMPLE = REPO_ROOT / "target" / "release" / "examples" / "squeezy_reclaim"


def _list(value) -> list[str]:
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def _cargo() -> str:
    return shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")


async def build(log) -> Path:
    """Build the example (quick when up to date). A failed build with an older binary present
    is reported and the old binary used: a half-edited crate must not cost the measurement."""
    proc = await asyncio.create_subprocess_exec(
        _cargo(),
        "build",
        "--release",
        "-p",
        "icebox-vm",
        "--example",
        "squeezy_reclaim",
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        tail = "\n".join(out.decode(errors="replace").splitlines()[-15:])
        if not EXAMPLE.is_file():
            raise RuntimeError(f"building squeezy_reclaim failed:\n{tail}")
        log(f"warning: building squeezy_reclaim failed; using the existing binary:\n{tail}")
    return EXAMPLE


def example_args(series: str, s: dict) -> list[str]:
    mode, zeroing = fig5.SERIES[series]
    args = [
        "--modes",
        mode,
        "--sizes",
        ",".join(str(x) for x in s["sizes"]),
        "--partitions",
        str(s["partitions"]),
        "--fill",
        str(s["fill"]),
        "--repetitions",
        str(s["repetitions"]),
        "--accel",
        str(s["accel"]),
    ]
    if zeroing is not None:
        args += ["--guest-zeroing", "on" if zeroing else "off"]
    if s.get("block_mib"):
        args += ["--block-mib", str(s["block_mib"])]
    return args


async def run_series(binary: Path, series: str, s: dict, sink, log) -> None:
    """One example process; every stdout line is a measurement (or a configuration's error)."""
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        *example_args(series, s),
        cwd=REPO_ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
    )

    async def stderr() -> None:
        async for raw in proc.stderr:
            log(f"[{series}] {raw.decode(errors='replace').rstrip()}")

    err_task = asyncio.create_task(stderr())
    try:
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            sample = {"series": series, **json.loads(line)}
            sink(sample)
            if "report" in sample:
                r = sample["report"]
                log(
                    f"[{series}] {sample['size_mib']} MiB, fullness {sample['fullness']:.2f}: unplug "
                    f"{r.get('unplug_ms', 0):.0f} ms, {r.get('pages_migrated')} pages migrated ({r.get('outcome')})"
                )
            else:
                log(f"[{series}] error: {sample.get('error')}")
        code = await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()  # our own child, by its handle
            await proc.wait()
        raise
    finally:
        await err_task
    if code != 0:
        raise RuntimeError(f"squeezy_reclaim exited with {code}")


@register
class SqueezyFig5(Recipe):
    name = "squeezy-fig5"
    description = "Squeezy Fig. 5/6: reclaim latency of an N:1 VM per memory mode, partition size and fullness"
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--series",
            default=None,
            help=f"comma list of {','.join(fig5.SERIES)} (virtio-mem-nozero: Fig. 6's vanilla)",
        )
        parser.add_argument("--sizes", default=None, help="partition sizes in MiB, comma separated")
        parser.add_argument("--partitions", type=int, default=None, help="partitions per VM (fullness levels)")
        parser.add_argument("--fill", type=float, default=None, help="share of its partition each instance writes")
        parser.add_argument("--repetitions", type=int, default=None, help="unplugs per fullness level")
        parser.add_argument("--block-mib", type=int, default=None, help="virtio-mem block size (0: the backend's)")
        parser.add_argument("--accel", default=None, help="auto, kvm or tcg")

    async def run(self, ctx: RecipeContext) -> dict:
        s = dict(ctx.settings)
        s["sizes"] = [int(x) for x in _list(s["sizes"])]
        series = _list(s["series"])
        unknown = [x for x in series if x not in fig5.SERIES]
        if unknown:
            raise ValueError(f"unknown series {unknown}; known: {', '.join(fig5.SERIES)}")
        accel = vm_accel.resolve(s.get("accel"))
        binary = await build(ctx.log)
        writer = ctx.run_dir.jsonl("samples.jsonl")
        samples: list[dict] = []
        failed: dict[str, str] = {}
        durations: dict[str, float] = {}

        def sink(sample: dict) -> None:
            samples.append(sample)
            writer.write(sample)

        def current() -> dict:
            result = fig5.summary(
                samples,
                sizes=s["sizes"],
                series=series,
                partitions=int(s["partitions"]),
                fill=float(s["fill"]),
                accel=accel,
                failed=failed,
            )
            result["series_seconds"] = durations
            return result

        for name in series:
            ctx.log(f"{name}: squeezy_reclaim {' '.join(example_args(name, s))}")
            t0 = time.monotonic()
            try:
                await run_series(binary, name, s, sink, ctx.log)
            except (OSError, RuntimeError, ValueError) as e:
                failed[name] = str(e)
                ctx.log(f"error: {name}: {e}")
            durations[name] = round(time.monotonic() - t0, 1)
            ctx.run_dir.write_json("summary.json", current())
        result = current()
        if result["failed"]:
            ctx.session.result["failed"] = result["failed"]
        for t in result["targets"]:
            ctx.log(f"target {t['target']}: {t['value']} {'met' if t['met'] else 'missed'} (paper {t['paper']})")
        if result["note"]:
            ctx.log(result["note"])
        return result

    def render(self, out: Path, summary: dict) -> list[Path]:
        return fig5_render.render(out, summary)
