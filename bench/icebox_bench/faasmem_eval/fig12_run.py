"""Fig. 12's protocol: for each load (high, low) and each offload mode (none, tmo, faasmem), one
run (run.py) with its own iceboxd: the same flags for every mode (`--offload-pool` included, so
the pool exists in mode none too) but `--offload MODE`; every benchmark function deployed; the
load's mapped trace functions replayed concurrently, open loop, `speed` times faster than the
trace; keep-alive (the paper's 10 minutes) shortened by the same factor; a tail after the last
send so the memory of instances kept alive is counted. Modes of one load run back to back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import schedule as schedule_mod
from ..manifest import FunctionSpec
from ..traces.model import Trace
from . import fig12
from .run import Replay, run_replay

PAPER_KEEP_ALIVE_S = 600.0
# iceboxd's semi-warm start for an action with too few reuses of its own (--semiwarm-start):
# a time of the trace, so it shrinks with the replay like the keep-alive does.
SEMIWARM_START_S = 60.0
# iceboxd's default semi-warm rate (the paper's 1 %/s), sped up with the replay so a semi-warm
# instance gives up the same share of its memory per unit of trace time.
SEMIWARM_PERCENT_PER_S = 1.0


def scaled_keep_alive_s(speed: float) -> float:
    if speed <= 0:
        raise ValueError("--speed must be positive")
    return PAPER_KEEP_ALIVE_S / speed


@dataclass
class Plan:
    specs: list[FunctionSpec]
    trace: Trace
    trace_name: str
    loads: dict[str, dict]  # loads.plan_loads
    origin_s: float
    speed: float
    keep_alive_s: float
    tail_s: float
    pool: str
    daemon_args: list[str]  # besides --offload-pool, --offload and --keep-alive
    size: str
    drain_timeout_s: float
    sample_period_s: float = 1.0

    def schedule(self, load: str) -> schedule_mod.Schedule:
        timeline = schedule_mod.Timeline(origin_s=self.origin_s, scale=self.speed)
        return schedule_mod.build(self.trace.invocations, self.loads[load]["mapping"], timeline)

    def flags(self, mode: str) -> list[str]:
        scaled = [
            "--offload-pool",
            self.pool,
            "--offload",
            mode,
            "--keep-alive",
            f"{self.keep_alive_s:g}s",
            "--semiwarm-start",
            f"{SEMIWARM_START_S / self.speed:g}s",
        ]
        if "--semiwarm" not in self.daemon_args:
            scaled += ["--semiwarm", f"{SEMIWARM_PERCENT_PER_S * self.speed:g}%/s"]
        return [*scaled, *self.daemon_args]

    def used(self, load: str) -> list[FunctionSpec]:
        names = set(self.loads[load]["mapping"].values())
        return [s for s in self.specs if s.name in names]


def run_label(load: str, mode: str) -> str:
    return f"{load}-{mode}"


async def run_one(plan: Plan, load: str, mode: str, out: Path, *, command: str, log=print) -> dict:
    """One (load, mode) run; returns its summary entry (fig12.analyse_run)."""
    used = plan.used(load)
    replay = Replay(
        recipe="faasmem-fig12",
        label=run_label(load, mode),
        specs=used,
        schedule=plan.schedule(load),
        daemon_args=plan.flags(mode),
        size=plan.size,
        tail_s=plan.tail_s,
        drain_timeout_s=plan.drain_timeout_s,
        sample_period_s=plan.sample_period_s,
        config={
            "load": load,
            "mode": mode,
            "speed": plan.speed,
            "trace": {
                "name": plan.trace_name,
                "format": plan.trace.format,
                "sources": plan.trace.sources,
                "origin_s": plan.origin_s,
            },
            "mapping": {"mode": "load-split", "functions": plan.loads[load]["mapping"]},
        },
    )
    path = await run_replay(replay, out, command=command, log=log)
    return fig12.analyse_run(path, [s.name for s in used])
