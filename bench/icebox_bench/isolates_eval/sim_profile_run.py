"""The live measurements behind sim_profile.py, one function at a time."""

from __future__ import annotations

import asyncio

from ..client import IceboxClient
from ..desiccant_eval.actions import memory_of, reclaim, wait_frozen
from ..invoke import invoke_once
from ..manifest import FunctionSpec
from . import sim_profile
from .actions import deploy, remove, sharing_body
from .memory import peaks
from .memory_run import MemoryPlan, measure_mode


async def cold_and_idle(
    client: IceboxClient,
    spec: FunctionSpec,
    *,
    runs: int,
    warm_n: int,
    size: str,
    measure: str,
    idle_after: int | None = None,
    log=print,
) -> dict:
    """`runs` cold starts (a new version each) with `warm_n` warm invocations after each; the
    last instance then frozen (idle none) and reclaimed (idle desiccant). With `idle_after`,
    the idle memory is that of one more new instance after that many invocations instead: an
    idle instance holds the garbage of the invocations it ran, so the profile should match how
    often the simulated functions run."""
    action = f"profile-sim.{spec.name}"
    body = sharing_body(spec, "process", concurrency=1, reclaim="desiccant")
    out: dict = {"runs": [], "warm_durations_ms": []}
    try:
        instance = None
        for i in range(runs):
            await deploy(client, action, body)
            records = [
                await invoke_once(client, action, spec.input(size), action_timeout_ms=spec.timeout_ms)
                for _ in range(warm_n + 1)
            ]
            bad = [r for r in records if r["status"] != "success"]
            if bad:
                raise RuntimeError(f"{spec.name}: invocation failed: {bad[0].get('error') or bad[0]['status']}")
            if records[0].get("start_kind") != "cold":
                log(
                    f"warning: {spec.name}: run {i + 1}'s first invocation was {records[0].get('start_kind')}, not cold"
                )
            warm = records[1:]
            out["runs"].append(
                {
                    "cold_ms": records[0]["latency_ms"],
                    "start_kind": records[0].get("start_kind"),
                    "init_ms": records[0].get("init_ms"),
                    "warm_ms": [r["latency_ms"] for r in warm],
                }
            )
            out["warm_durations_ms"] += [float(r["duration_ms"]) for r in warm if r.get("duration_ms") is not None]
            instance = records[-1]["instance"]
        instances = [instance]
        if idle_after:
            # Two instances side by side, each after `idle_after` invocations: the function's own
            # library pages (crypto, ...) are then shared, as among a trace's many instances,
            # and USS leaves them out. The idle figures are their means.
            await deploy(client, action, body)
            for _ in range(idle_after):
                pair = await asyncio.gather(
                    *(
                        invoke_once(client, action, spec.input(size), action_timeout_ms=spec.timeout_ms)
                        for _ in range(2)
                    )
                )
                bad = [r for r in pair if r["status"] != "success"]
                if bad:
                    raise RuntimeError(f"{spec.name}: invocation failed: {bad[0].get('error') or bad[0]['status']}")
            instances = sorted({r["instance"] for r in pair})
            out["idle_after"] = idle_after
        frozen = [memory_of(await wait_frozen(client, i)) for i in instances]
        out["reclaim"] = [await reclaim(client, i) for i in instances]
        reclaimed = [memory_of(await wait_frozen(client, i)) for i in instances]
        out["idle_none"] = sum(m[measure] for m in frozen) // len(frozen)
        out["idle_desiccant"] = sum(m[measure] for m in reclaimed) // len(reclaimed)
        out["idle_memory"] = {"none": frozen, "desiccant": reclaimed}
        log(
            f"{spec.name}: cold {[r['cold_ms'] for r in out['runs']]} ms, idle {measure} "
            f"{out['idle_none'] / 2**20:.1f} -> {out['idle_desiccant'] / 2**20:.1f} MiB after reclaim "
            f"({len(instances)} instance(s))"
        )
    finally:
        await remove(client, action, log)
    return out


async def measure_function(
    client: IceboxClient,
    spec: FunctionSpec,
    plan: MemoryPlan,
    modes: list[str],
    *,
    runs: int,
    warm_n: int,
    idle_after: int | None = None,
    log=print,
) -> tuple[dict, dict]:
    """(the function's profile entry, everything measured)."""
    idle = await cold_and_idle(
        client, spec, runs=runs, warm_n=warm_n, size=plan.size, measure=plan.measure, idle_after=idle_after, log=log
    )
    per_mode = {m: await measure_mode(client, spec, m, plan, prefix="profile-sim", log=log) for m in modes}
    entry = sim_profile.function_entry(
        runs=idle["runs"],
        warm_durations_ms=idle["warm_durations_ms"],
        peaks={m: peaks(e["points"]) for m, e in per_mode.items()},
        idle_none=idle["idle_none"],
        idle_desiccant=idle["idle_desiccant"],
    )
    return entry, {"cold_and_idle": idle, "modes": per_mode}


async def _frozen_after_each(
    client: IceboxClient, action: str, spec: FunctionSpec, n: int, size: str, measure: str
) -> list[int]:
    instance, out = None, []
    for i in range(n):
        r = await invoke_once(client, action, spec.input(size), action_timeout_ms=spec.timeout_ms)
        if r["status"] != "success" or (instance is not None and r["instance"] != instance):
            raise RuntimeError(f"{action}: invocation {i + 1} failed or ran on another instance: {r.get('error')}")
        instance = r["instance"]
        out.append(memory_of(await wait_frozen(client, instance))[measure])
    return out


async def idle_curve(
    client: IceboxClient, spec: FunctionSpec, n: int, *, size: str, measure: str, log=print
) -> list[float]:
    """MiB of `measure` after each of n sequential invocations, once frozen (as idle instances
    are: V8 returns freed pages on a background thread after an activation), the mean of two
    instances run side by side (two actions of the same code: the function's own library pages
    shared)."""
    actions = [f"profile-sim.{spec.name}.curve{k}" for k in (1, 2)]
    body = sharing_body(spec, "process", concurrency=1)
    try:
        for action in actions:
            await deploy(client, action, body)
        loops = await asyncio.gather(*(_frozen_after_each(client, a, spec, n, size, measure) for a in actions))
    finally:
        for action in actions:
            await remove(client, action, log)
    curve = [round(sum(loop[i] for loop in loops) / len(loops) / 2**20, 3) for i in range(n)]
    log(f"{spec.name}: idle {measure} after 1 / {n} invocations: {curve[0]} / {curve[-1]} MiB")
    return curve
