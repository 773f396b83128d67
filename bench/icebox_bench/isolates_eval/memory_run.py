"""The live part of isolates-memory: one action per (function, mode), deployed with
limits.concurrency = the highest level, then for each level n (ascending) n activations held in
flight while the action's instances are measured. The action is deleted (its instances gone)
before the next mode starts, so every mode is measured in the same surroundings."""

from __future__ import annotations

from dataclasses import dataclass

from ..client import IceboxClient
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from . import memory
from .actions import deploy, remove, reported_modes, sharing_body
from .closed_loop import run_closed_loop


@dataclass
class MemoryPlan:
    levels: list[int]
    measure: str = "pss"
    memory_mb: int | None = None
    isolate: dict | None = None
    warmup_s: float = 1.0
    hold_s: float = 3.0
    sample_period_s: float = 0.5
    size: str = "A"


def action_name(prefix: str, function: str, mode: str) -> str:
    return f"{prefix}.{function}.{mode}"


async def measure_mode(
    client: IceboxClient,
    spec: FunctionSpec,
    mode: str,
    plan: MemoryPlan,
    *,
    prefix: str = "isolates-memory",
    invocations: JsonlWriter | None = None,
    samples: JsonlWriter | None = None,
    log=print,
) -> dict:
    """{"points": {n: level_point}, "reported_modes": [...], "failures": {n: first error}}."""
    action = action_name(prefix, spec.name, mode)
    body = sharing_body(spec, mode, concurrency=max(plan.levels), memory_mb=plan.memory_mb, isolate=plan.isolate)
    await deploy(client, action, body)
    points: dict[str, dict] = {}
    reported: set[str] = set()
    errors: dict[str, str] = {}
    try:
        for n in sorted(plan.levels):
            r = await run_closed_loop(
                client,
                action,
                spec.input(plan.size),
                n,
                warmup_s=plan.warmup_s,
                measure_s=plan.hold_s,
                sample_period_s=plan.sample_period_s,
                invocations=invocations,
                tags={"function": spec.name, "mode": mode},
                timeout_ms=spec.timeout_ms,
            )
            for s in r.samples:
                reported |= reported_modes(s)
                if samples is not None:
                    samples.write({"function": spec.name, "mode": mode, "concurrency": n, **s})
            failed = r.failures()
            if failed:
                errors[str(n)] = str(failed[0].get("error") or failed[0]["status"])
                log(
                    f"warning: {spec.name}/{mode} n={n}: {len(failed)} of {len(r.records)} invocations failed: "
                    f"{errors[str(n)]}"
                )
            points[str(n)] = memory.level_point(
                r.samples, plan.measure, invocations=len(r.records), failures=len(failed)
            )
            p = points[str(n)]
            log(
                f"{spec.name}/{mode} n={n}: {plan.measure} peak {p['peak_mb']} MiB, mean {p['mean_mb']} MiB, "
                f"{p['instances']} instance(s), {p['in_flight_mean']} in flight"
            )
    finally:
        await remove(client, action, log)
    if reported and reported != {mode}:
        raise RuntimeError(f"{action}: the daemon reports sharing mode(s) {sorted(reported)}, not {mode}")
    return {"points": points, "reported_modes": sorted(reported), "failures": errors}
