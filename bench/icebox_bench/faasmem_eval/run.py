"""One FaaSMem run: its own iceboxd (the given offload flags), the functions deployed, a
schedule replayed open loop, then a quiet tail, all recorded.

The run directory is a complete run directory (`icebox-bench report` reads it) plus cpu.jsonl
and offload.jsonl (probes.py), metrics.prom (the daemon's /metrics at the end) and iceboxd.log.
result.json's `window_ms` is what the figures average over: from the replay's offset 0 to the
end of the tail (`tail_s` after the last scheduled send, or the last answer if later), so the
memory of instances kept alive after the last request counts too.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..client import IceboxClient, IceboxError
from ..daemon import DaemonError
from ..deploy import deploy
from ..desiccant_eval.cpu import metered_daemon, save_metrics
from ..manifest import FunctionSpec
from ..openloop import OpenLoop
from ..recorder import RunDir
from ..schedule import Schedule
from ..session import RunSession
from .probes import OffloadSampler

# `--offload` itself, not `--offload-pool` or `--offload-bandwidth`.
_OFFLOAD_FLAG = re.compile(r"--offload(?![\w-])")


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of `flag` in an argv list (`--flag value` or `--flag=value`; the last wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def supports_offload(help_text: str) -> bool:
    return bool(_OFFLOAD_FLAG.search(help_text))


def iceboxd_help(binary: Path | None = None) -> str:
    binary = Path(binary) if binary else paths.iceboxd_binary()
    if not binary.is_file():
        raise DaemonError(f"{binary} is missing: build it with `make build` (or set ICEBOX_BIN_DIR)")
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30)
    return done.stdout + done.stderr


def check_prerequisites(daemon_args: list[str], *, help_text: str | None = None, euid: int | None = None) -> None:
    """Fail before anything starts: the daemon must know --offload, and a zram pool needs root."""
    text = iceboxd_help() if help_text is None else help_text
    if not supports_offload(text):
        raise DaemonError(
            "this iceboxd has no --offload flag: the FaaSMem recipes need the daemon with "
            "memory offloading (rebuild target/release/iceboxd from a tree that has it)"
        )
    pool = flag_value(daemon_args, "--offload-pool") or "none"
    euid = os.geteuid() if euid is None else euid
    if pool.startswith("zram") and euid != 0:
        raise DaemonError(
            f"--offload-pool {pool} needs root (iceboxd creates and removes a zram swap device): "
            "run the recipe as root, or use --offload-pool swap with swap the operator enabled"
        )
    if pool == "none":
        raise DaemonError(
            "--offload-pool none: nothing can be offloaded; give the replay daemons a pool (zram:SIZE or swap)"
        )


@dataclass
class Replay:
    recipe: str
    label: str
    specs: list[FunctionSpec]
    schedule: Schedule
    daemon_args: list[str]
    size: str = "A"
    tail_s: float = 0.0
    drain_timeout_s: float = 120.0
    sample_period_s: float = 1.0
    config: dict = field(default_factory=dict)  # recorded in config.json as it is


async def run_replay(replay: Replay, out: Path, *, command: str, log=print) -> Path:
    """Run it; returns the run directory."""
    run_dir = RunDir(out)
    specs = {s.name: s for s in replay.specs}
    log(
        f"[{replay.label}] starting iceboxd {' '.join(replay.daemon_args)}; "
        f"{len(replay.schedule.items)} invocations over {replay.schedule.length_s():.0f} s, then {replay.tail_s:g} s"
    )
    async with metered_daemon(replay.daemon_args, log_path=run_dir.file("iceboxd.log"), log=log) as daemon:
        async with IceboxClient(daemon.apihost, daemon.auth) as client:
            for spec in replay.specs:
                await deploy(client, spec)
            config = {
                "command": command,
                "kind": "recipe-run",
                "recipe": replay.recipe,
                "label": replay.label,
                "daemon_args": replay.daemon_args,
                "input": replay.size,
                "tail_s": replay.tail_s,
                "functions": {
                    s.name: {"language": s.language, "kind": s.kind, "memory_mb": s.memory_mb} for s in replay.specs
                },
                "scheduled": len(replay.schedule.items),
                **replay.config,
            }
            async with RunSession(client, run_dir, config, sample_period_s=replay.sample_period_s, log=log) as session:
                sampler = OffloadSampler(
                    client, daemon, run_dir.jsonl("cpu.jsonl"), run_dir.jsonl("offload.jsonl"), replay.sample_period_s
                )
                sampler.start()
                try:
                    driver = OpenLoop(
                        client,
                        replay.schedule,
                        session.invocations,
                        params={n: s.input(replay.size) for n, s in specs.items()},
                        action_timeouts_ms={n: s.timeout_ms for n, s in specs.items() if s.timeout_ms},
                        drain_timeout_s=replay.drain_timeout_s,
                        log=log,
                    )
                    result = await driver.run()
                    session.result.update(result.to_json())
                    if not result.aborted:
                        tail_end = result.start_epoch_ms / 1000.0 + replay.schedule.length_s() + replay.tail_s
                        await asyncio.sleep(max(0.0, tail_end - time.time()))
                    session.result["window_ms"] = [result.start_epoch_ms, round(time.time() * 1000.0, 3)]
                finally:
                    await sampler.stop()
                    await save_metrics(client, run_dir.file("metrics.prom"))
    return run_dir.path


# What one failed run is: the recipe records it and goes on with the next.
RUN_ERRORS = (IceboxError, DaemonError, OSError, ValueError)


async def attempt(label: str, work, failed: dict, log=print):
    """Await `work` (one run and its analysis); on a run error, record it in `failed[label]`
    and answer None."""
    try:
        return await work
    except RUN_ERRORS as e:
        failed[label] = str(e)
        log(f"error: {label}: {e}")
        return None
