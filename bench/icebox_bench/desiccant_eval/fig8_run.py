"""Fig. 8's protocol: k instances of one function, each after n invocations, frozen.

Each instance is its own action (`desiccant-fig8.<f>.<mode>.<i>`, same code), so each runs
exactly n invocations, one after the other, and its memory does not depend on how a load
balancer spread them.

* **vanilla**: instances are added one at a time; after adding the k-th, all k are measured.
  Nothing changes in a frozen vanilla instance, so the first k of 8 are the same as a fresh set
  of k.
* **desiccant**: a fresh set for every k. Reclaiming pages out library pages no other instance
  maps (§4.6) and they stay out until the instance runs again, so an instance reclaimed while
  alone would carry that into every larger set. For each k: start k instances, reclaim each
  (all k alive), measure each, delete them all.

The vanilla set is deleted (and gone) before the desiccant sets start: a frozen vanilla
instance would share the runtime's pages with a one-instance desiccant set.
"""

from __future__ import annotations

from ..client import IceboxClient
from ..loop import run_loop
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from .actions import check_mode, delete_quietly, deploy_mode, memory_of, reclaim, wait_frozen, wait_gone


def action_name(function: str, mode: str, index: int) -> str:
    return f"desiccant-fig8.{function}.{mode}.{index}"


async def _start(
    client: IceboxClient,
    spec: FunctionSpec,
    mode: str,
    index: int,
    iterations: int,
    params: dict,
    *,
    invocations: JsonlWriter,
    log,
) -> str:
    """Deploy one more action and run its n invocations; returns its instance."""
    action = action_name(spec.name, mode, index)
    await deploy_mode(client, spec, action, mode)
    records = await run_loop(
        client,
        action,
        params,
        iterations,
        invocations=invocations,
        timeout_ms=spec.timeout_ms,
        function=spec.name,
        tags={"phase": mode, "index": index},
        log=log,
    )
    view = await wait_frozen(client, records[0]["instance"])
    check_mode(view, mode)
    return records[0]["instance"]


async def _measure_all(
    client: IceboxClient, instances: list[str], mode: str, k: int, exits: JsonlWriter, function: str
) -> list[dict]:
    memories = []
    for index, instance in enumerate(instances, start=1):
        memory = memory_of(await wait_frozen(client, instance))
        exits.write(
            {"function": function, "phase": mode, "instances": k, "index": index, "instance": instance, **memory}
        )
        memories.append(memory)
    return memories


async def measure(
    client: IceboxClient,
    spec: FunctionSpec,
    max_instances: int,
    iterations: int,
    size: str,
    *,
    invocations: JsonlWriter,
    exits: JsonlWriter,
    reclaims: JsonlWriter,
    log=print,
) -> dict:
    """{"vanilla": {k: [memory per instance]}, "desiccant": {k: [...]}}, bytes."""
    params = spec.input(size)
    out: dict = {"vanilla": {}, "desiccant": {}}
    vanilla_actions = [action_name(spec.name, "vanilla", i) for i in range(1, max_instances + 1)]
    instances: list[str] = []
    try:
        for k in range(1, max_instances + 1):
            log(f"{spec.name}: vanilla, instance {k} of {max_instances}, {iterations} invocations")
            instances.append(
                await _start(client, spec, "vanilla", k, iterations, params, invocations=invocations, log=log)
            )
            out["vanilla"][k] = await _measure_all(client, instances, "vanilla", k, exits, spec.name)
    finally:
        await delete_quietly(client, vanilla_actions, log)
    await wait_gone(client, instances)

    for k in range(1, max_instances + 1):
        actions = [action_name(spec.name, "desiccant", i) for i in range(1, k + 1)]
        instances = []
        try:
            log(f"{spec.name}: desiccant, a set of {k} instance(s), {iterations} invocations each")
            for index in range(1, k + 1):
                instances.append(
                    await _start(client, spec, "desiccant", index, iterations, params, invocations=invocations, log=log)
                )
            for index, instance in enumerate(instances, start=1):
                report = await reclaim(client, instance)
                reclaims.write({"function": spec.name, "instances": k, "index": index, **report})
            out["desiccant"][k] = await _measure_all(client, instances, "desiccant", k, exits, spec.name)
        finally:
            await delete_quietly(client, actions, log)
        await wait_gone(client, instances)
    return out
