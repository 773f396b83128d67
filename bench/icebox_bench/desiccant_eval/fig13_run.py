"""Fig. 13's protocol for one function: one fresh instance per reclaim variant.

For each variant: deploy `desiccant-fig13.<f>.<variant>` (mode desiccant), run n invocations,
wait until frozen, reclaim with `?variant=`, run w more on the same instance. The first pass
reclaims without a variant: the runtime's default, whose name the reclaim report gives; the
configured variants then run, except the one that was the default.

Every invocation of the two windows starts from a frozen instance (the recipe waits for the
freeze after each): the first one after the reclaim necessarily does, so the ones it is
compared with must too, or the thaw would count as the reclaim's cost.

`pause_s` (default 0, the paper's protocol) leaves the reclaimed instance frozen that long
before the first invocation after it, as a keep-alive pool does between invocations: the
library pages the reclaim read back into the page cache (--library-pageout keep-cached) are
then in place.
"""

from __future__ import annotations

import asyncio

from ..client import IceboxClient, IceboxError
from ..loop import LoopError, run_loop
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from . import fig13
from .actions import ProtocolError, delete_quietly, deploy_mode, reclaim, wait_frozen


def action_name(function: str, label: str) -> str:
    return f"desiccant-fig13.{function}.{label}"


async def _one_pass(
    client: IceboxClient,
    spec: FunctionSpec,
    variant: str | None,
    before_runs: int,
    window: int,
    params: dict,
    *,
    invocations: JsonlWriter,
    reclaims: JsonlWriter,
    log,
    pause_s: float = 0.0,
) -> tuple[str, dict]:
    label = variant or "default"
    action = action_name(spec.name, label)

    def frozen_from(first: int):
        # After exit `first` onwards: run first+1 onwards starts from a frozen instance.
        async def hook(i: int, fields: dict, record: dict) -> None:
            if i >= first:
                await wait_frozen(client, record["instance"])

        return hook

    try:
        await deploy_mode(client, spec, action, "desiccant")
        log(f"{spec.name} [{label}]: {before_runs} invocations, reclaim, {window} more")
        tags = {"variant": label}
        before = await run_loop(
            client,
            action,
            params,
            before_runs,
            invocations=invocations,
            timeout_ms=spec.timeout_ms,
            function=spec.name,
            tags={**tags, "phase": "before"},
            after_exit=frozen_from(before_runs - window),
            log=log,
        )
        instance = before[0]["instance"]
        await wait_frozen(client, instance)
        report = await reclaim(client, instance, variant)
        reclaims.write({"function": spec.name, "requested_variant": variant, **report})
        await wait_frozen(client, instance)
        await asyncio.sleep(pause_s)
        after = await run_loop(
            client,
            action,
            params,
            window,
            invocations=invocations,
            timeout_ms=spec.timeout_ms,
            function=spec.name,
            tags={**tags, "phase": "after"},
            after_exit=frozen_from(0),
            log=log,
        )
        if after[0]["instance"] != instance:
            raise ProtocolError(
                f"{action}: the invocations after the reclaim ran on {after[0]['instance']}, "
                f"not the reclaimed {instance} (evicted?)"
            )
    finally:
        await delete_quietly(client, [action], log)
    last = before[-window:]
    entry = fig13.variant_entry(
        [r["duration_ms"] for r in last],
        [r["duration_ms"] for r in after],
        before_latency_ms=[r["latency_ms"] for r in last],
        after_latency_ms=[r["latency_ms"] for r in after],
        report=report,
    )
    return str(report.get("variant") or label), entry


async def measure_function(
    client: IceboxClient,
    spec: FunctionSpec,
    variants: list[str],
    before_runs: int,
    window: int,
    size: str,
    *,
    invocations: JsonlWriter,
    reclaims: JsonlWriter,
    log=print,
    pause_s: float = 0.0,
) -> dict:
    """{"language", "default_variant", "variants": {name: entry}}; raises ProtocolError."""
    if window < 1 or before_runs < window:
        raise ValueError("the window must be at least 1 and at most the invocations before the reclaim")
    params = spec.input(size)
    out: dict = {"language": spec.language, "default_variant": None, "variants": {}}
    try:
        default, entry = await _one_pass(
            client,
            spec,
            None,
            before_runs,
            window,
            params,
            invocations=invocations,
            reclaims=reclaims,
            log=log,
            pause_s=pause_s,
        )
        out["default_variant"] = default
        out["variants"][default] = entry
        for variant in variants:
            if variant in out["variants"]:
                continue
            name, entry = await _one_pass(
                client,
                spec,
                variant,
                before_runs,
                window,
                params,
                invocations=invocations,
                reclaims=reclaims,
                log=log,
                pause_s=pause_s,
            )
            out["variants"][name] = entry
    except (IceboxError, LoopError) as e:
        raise ProtocolError(str(e)) from None
    return out
