"""The live part of isolates-latency.

Latency: one action of the function per mode (limits.concurrency = the highest level); per
level n, n workers in a closed loop, a warm-up, then `measure_s` recorded. After the isolate
mode's levels its instance's /stats gives the isolate start times.

Teardown: an action of our own (isolate mode, kept in the recipe, no function of the manifest
holds memory across activations) whose activation keeps `hold_mb` MiB of JS arrays in a
module global — alive in the Worker that ran it, after the activation returned. The instance is
first reclaimed with nothing held (every idle isolate terminated, the runtime trimmed): RSS_r.
Then one activation holds the memory: RSS_held; then the same reclaim tears that isolate down:
RSS_after. returned = (RSS_held − RSS_after) / (RSS_held − RSS_r), both reclaims alike.
"""

from __future__ import annotations

from ..client import IceboxClient
from ..desiccant_eval.actions import memory_of, reclaim, wait_frozen
from ..invoke import invoke_once
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from . import latency
from .actions import deploy, instances_of, remove, sharing_body
from .closed_loop import run_closed_loop

HOLD_SOURCE = """\
// icebox-bench isolates-latency: keeps hold_mb MiB of JS arrays alive in this isolate.
const held = [];
function main(args) {
  const mb = Number(args.hold_mb || 0);
  for (let i = 0; i < mb; i++) {
    // 131072 doubles = 1 MiB, one large object each, every page written.
    held.push(Array.from({ length: 131072 }, (_, j) => i + j + 0.5));
  }
  return { held_mib: held.length };
}
"""


async def measure_mode(
    client: IceboxClient,
    spec: FunctionSpec,
    mode: str,
    levels: list[int],
    *,
    warmup_s: float,
    measure_s: float,
    memory_mb: int | None,
    isolate: dict | None,
    size: str = "A",
    invocations: JsonlWriter | None = None,
    log=print,
) -> tuple[dict, dict | None]:
    """({level: latency.level_entry}, isolate start times or None)."""
    action = f"isolates-latency.{spec.name}.{mode}"
    await deploy(
        client, action, sharing_body(spec, mode, concurrency=max(levels), memory_mb=memory_mb, isolate=isolate)
    )
    out: dict[str, dict] = {}
    starts = None
    try:
        for n in sorted(levels):
            r = await run_closed_loop(
                client,
                action,
                spec.input(size),
                n,
                warmup_s=warmup_s,
                measure_s=measure_s,
                invocations=invocations,
                tags={"function": spec.name, "mode": mode},
                timeout_ms=spec.timeout_ms,
            )
            out[str(n)] = latency.level_entry(r.measured())
            e = out[str(n)]
            log(
                f"{spec.name}/{mode} c={n}: p50 {e['latency_ms']['p50']} ms, p99 {e['latency_ms']['p99']} ms "
                f"over {e['count']} ({e['failures']} failed)"
            )
        if mode == "isolate":
            for view in await instances_of(client, action):
                s = latency.start_times(await client.instance_stats(view["id"]))
                if s is not None and (starts is None or s.get("created", 0) > starts.get("created", 0)):
                    starts = s
    finally:
        await remove(client, action, log)
    return out, starts


async def measure_starts(
    client: IceboxClient,
    spec: FunctionSpec,
    *,
    rounds: int,
    memory_mb: int | None,
    isolate: dict | None,
    size: str = "A",
    log=print,
) -> dict | None:
    """Isolate start times on an otherwise idle node: `rounds` fresh starts (each after a reclaim
    terminated every idle isolate, so the activation must create one), then `rounds` pool starts
    (sequential activations borrowing the warm isolate). The runtime's medians, from /stats."""
    action = f"isolates-latency.{spec.name}.starts"
    await deploy(
        client,
        action,
        sharing_body(spec, "isolate", concurrency=2, memory_mb=memory_mb, isolate=isolate, reclaim="desiccant"),
    )
    params = spec.input(size)
    try:
        first = await invoke_once(client, action, params, action_timeout_ms=spec.timeout_ms)
        if first["status"] != "success":
            raise RuntimeError(f"{action} failed: {first.get('error')}")
        instance = first["instance"]

        async def start_sample(key: str) -> float | None:
            """One activation on the instance; the start time the runtime recorded for it."""
            r = await invoke_once(client, action, params, action_timeout_ms=spec.timeout_ms)
            if r["status"] != "success" or r["instance"] != instance:
                raise RuntimeError(f"{action}: a start round failed or moved: {r.get('error') or r['instance']}")
            return (latency.start_times(await client.instance_stats(instance)) or {}).get(key)

        fresh, pool = [], []
        for _ in range(rounds):
            await wait_frozen(client, instance)
            await reclaim(client, instance)
            fresh.append(await start_sample("fresh_last"))
        for _ in range(rounds):
            pool.append(await start_sample("pool_last"))
        out = latency.start_times(await client.instance_stats(instance))
        if out is not None:
            out["fresh_samples_ms"], out["pool_samples_ms"] = fresh, pool
            log(
                f"isolate starts, idle node: pool median {out.get('pool_median')} ms, fresh median "
                f"{out.get('fresh_median')} ms"
            )
        return out
    finally:
        await remove(client, action, log)


async def measure_teardown(
    client: IceboxClient,
    kind: str,
    *,
    hold_mb: int,
    isolate_memory_mb: int,
    memory_mb: int,
    variant: str | None = None,
    engine: str | None = None,
    log=print,
) -> dict:
    action = "isolates-latency.teardown"
    body = sharing_body(
        None,
        "isolate",
        concurrency=2,
        memory_mb=memory_mb,
        reclaim="desiccant",
        isolate={"memory_mb": isolate_memory_mb, "pool": 1, "engine": engine},
        exec_body={"kind": kind, "code": HOLD_SOURCE, "binary": False},
    )
    await deploy(client, action, body)
    try:
        first = await invoke_once(client, action, {"hold_mb": 0})
        if first["status"] != "success":
            raise RuntimeError(f"the teardown action failed: {first.get('error')}")
        instance = first["instance"]
        await wait_frozen(client, instance)
        await reclaim(client, instance, variant)
        reclaimed = memory_of(await wait_frozen(client, instance))
        held = await invoke_once(client, action, {"hold_mb": hold_mb})
        if held["status"] != "success" or held["instance"] != instance:
            raise RuntimeError(f"the holding activation failed or ran elsewhere: {held}")
        holding = memory_of(await wait_frozen(client, instance))
        before = latency.start_times(await client.instance_stats(instance))
        report = await reclaim(client, instance, variant)
        after = memory_of(await wait_frozen(client, instance))
        stats_after = latency.start_times(await client.instance_stats(instance))
        log(f"teardown: RSS reclaimed {reclaimed['rss']}, holding {holding['rss']}, after {after['rss']} bytes")
        return latency.teardown(
            reclaimed["rss"],
            holding["rss"],
            after["rss"],
            hold_mb=hold_mb,
            isolates_before=before,
            isolates_after=stats_after,
            reclaim=report,
            uss_mb={
                "reclaimed": reclaimed["uss"] / 2**20,
                "held": holding["uss"] / 2**20,
                "after": after["uss"] / 2**20,
            },
        )
    finally:
        await remove(client, action, log)
