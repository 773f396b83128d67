"""The live part of sim-validate: the events replayed open-loop on iceboxd, one action per
kept trace function, the action instances' memory (USS by default) sampled every second."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ..client import IceboxClient, IceboxError
from ..faasmem_eval.local_memory import action_name
from ..manifest import FunctionSpec
from ..openloop import OpenLoop
from ..recorder import JsonlWriter, read_jsonl
from ..schedule import Timeline, build
from ..traces.model import TraceInvocation
from ..units import MIB
from .actions import deploy, remove, sharing_body

ACTION_PREFIX = "sv"


@dataclass
class ReplayPlan:
    invocations: list[TraceInvocation]
    actions: dict[str, tuple[str, str]]  # trace function -> (action, benchmark function)
    specs: dict[str, FunctionSpec]
    origin_s: float
    speed: float
    sharing: str
    concurrency: int
    tail_s: float
    size: str = "A"
    drain_timeout_s: float = 120.0
    measure: str = "uss"


async def _sample(
    client: IceboxClient,
    actions: set[str],
    measure: str,
    t0_ms: float,
    out: list,
    stop: asyncio.Event,
    period_s: float = 1.0,
) -> None:
    while not stop.is_set():
        try:
            views = await client.instances()
            total = sum(
                int((v.get("memory") or {}).get(measure) or 0) for v in views if action_name(v.get("action")) in actions
            )
            out.append((time.time() * 1000.0 - t0_ms, total / MIB))
        except IceboxError:
            pass
        try:
            await asyncio.wait_for(stop.wait(), period_s)
        except TimeoutError:
            pass


async def replay(client: IceboxClient, plan: ReplayPlan, invocations: JsonlWriter, *, log=print) -> dict:
    """{"cold_starts", "warm_starts", "statuses", "memory": [(t ms, MiB)], "start_epoch_ms", ...}."""
    names = {a for a, _ in plan.actions.values()}
    for action, bench in sorted(set(plan.actions.values())):
        await deploy(client, action, sharing_body(plan.specs[bench], plan.sharing, concurrency=plan.concurrency))
    log(f"deployed {len(names)} actions ({plan.sharing} mode)")
    sched = build(
        plan.invocations,
        {t: a for t, (a, _) in plan.actions.items()},
        Timeline(origin_s=plan.origin_s, scale=plan.speed),
    )
    driver = OpenLoop(
        client,
        sched,
        invocations,
        params={a: plan.specs[b].input(plan.size) for a, b in plan.actions.values()},
        action_timeouts_ms={a: plan.specs[b].timeout_ms for a, b in plan.actions.values() if plan.specs[b].timeout_ms},
        drain_timeout_s=plan.drain_timeout_s,
        log=log,
    )
    samples: list[tuple[float, float]] = []
    stop = asyncio.Event()
    t0_ms = time.time() * 1000.0 + driver.start_delay_s * 1000.0
    sampler = asyncio.create_task(_sample(client, names, plan.measure, t0_ms, samples, stop))
    try:
        log(f"replaying {len(sched.items)} invocations over {sched.length_s():.0f} s")
        result = await driver.run()
        # Instances stay until their keep-alive: the horizon runs `tail_s` past the last event.
        remaining = sched.length_s() + plan.tail_s - (time.time() * 1000.0 - t0_ms) / 1000.0
        if remaining > 0:
            await asyncio.sleep(remaining)
    finally:
        stop.set()
        await sampler
        for action in sorted(names):
            await remove(client, action, log)
    mine = [r for r in read_jsonl(invocations.path) if r.get("function") in names]
    return {
        "scheduled": len(sched.items),
        "statuses": result.to_json()["statuses"],
        "cold_starts": sum(1 for r in mine if r.get("start_kind") == "cold"),
        "warm_starts": sum(1 for r in mine if r.get("start_kind") == "warm"),
        "lag_ms": result.lag_ms,
        "start_epoch_ms": result.start_epoch_ms,
        "memory": samples,
        "horizon_ms": (sched.length_s() + plan.tail_s) * 1000.0,
    }
