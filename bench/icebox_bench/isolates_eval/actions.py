"""Deploying an action in a sharing mode and reading its instances (spec §1–2).

An action's sharing mode is its `icebox.sharing` annotation; in isolate mode
`icebox.isolate_memory` (MB), `icebox.isolate_pool` and `icebox.isolate_idle_ms` tune the
isolate pool, and `icebox.isolate_engine` (v8 or worker) says what an isolate is.
`limits.concurrency` is how many activations one instance takes (process mode always takes
one, so n concurrent activations start n instances).
"""

from __future__ import annotations

import asyncio
import time

from ..client import ApiError, IceboxClient
from ..deploy import action_body, put_body
from ..desiccant_eval.actions import ProtocolError, delete_quietly, wait_gone
from ..faasmem_eval.local_memory import action_name
from ..manifest import FunctionSpec

SHARING_ANNOTATION = "icebox.sharing"


def sharing_body(
    spec: FunctionSpec | None,
    mode: str,
    *,
    concurrency: int,
    memory_mb: int | None = None,
    isolate: dict | None = None,
    reclaim: str | None = None,
    exec_body: dict | None = None,
) -> dict:
    """The action body of `spec` (or of `exec_body`) in `mode`. `isolate` may hold memory_mb,
    pool, idle_ms, engine (each only sent when not None)."""
    body = action_body(spec) if spec is not None else {"exec": exec_body}
    limits = body.setdefault("limits", {})
    limits["concurrency"] = int(concurrency)
    if memory_mb is not None:
        limits["memory"] = int(memory_mb)
    annotations = [{"key": SHARING_ANNOTATION, "value": mode}]
    names = {
        "memory_mb": "icebox.isolate_memory",
        "pool": "icebox.isolate_pool",
        "idle_ms": "icebox.isolate_idle_ms",
        "engine": "icebox.isolate_engine",
    }
    if mode == "isolate":
        for key, value in (isolate or {}).items():
            if value is not None:
                annotations.append({"key": names[key], "value": str(value) if key == "engine" else int(value)})
    if reclaim is not None:
        annotations.append({"key": "icebox.reclaim", "value": reclaim})
    body["annotations"] = annotations
    return body


async def deploy(client: IceboxClient, action: str, body: dict) -> dict:
    return await put_body(client, action, body, action)


async def instances_of(client: IceboxClient, action: str) -> list[dict]:
    return [v for v in await client.instances() if action_name(v.get("action")) == action]


async def measure_action(client: IceboxClient, action: str) -> dict:
    """The action's instances measured now (GET ?fresh=true each, concurrently): the sums of
    uss/pss/rss in bytes, the instance count, activations in flight, and each instance's
    `sharing` object as the daemon reports it (None from a daemon without it)."""
    views = await instances_of(client, action)

    async def fresh(view: dict) -> dict | None:
        try:
            return await client.instance(view["id"], fresh=True)
        except ApiError as e:
            if e.status == 404:  # evicted between the list and the read
                return None
            raise

    measured = [v for v in await asyncio.gather(*(fresh(v) for v in views)) if v is not None]
    out = {
        "t_ms": round(time.time() * 1000.0, 3),
        "instances": len(measured),
        "in_flight": sum(int(v.get("in_flight") or 0) for v in measured),
        "sharing_modes": [v.get("sharing_mode") for v in measured],
        "sharing": [v.get("sharing") for v in measured],
    }
    for m in ("uss", "pss", "rss"):
        out[m] = sum(int((v.get("memory") or {}).get(m) or 0) for v in measured)
    return out


def reported_modes(sample: dict) -> set[str]:
    """The modes the daemon (`sharing_mode`) and the runtimes (`sharing.mode`) say the
    instances run in; empty from a daemon that reports neither."""
    modes = {m for m in sample.get("sharing_modes") or [] if m}
    modes |= {s.get("mode") for s in sample.get("sharing") or [] if isinstance(s, dict) and s.get("mode")}
    return modes


async def remove(client: IceboxClient, action: str, log=print) -> None:
    """Delete the action and wait until its instances are gone: the next measurement must not
    see them."""
    try:
        ids = [v["id"] for v in await instances_of(client, action)]
        await delete_quietly(client, [action], log)
        await wait_gone(client, ids)
    except (ApiError, ProtocolError) as e:
        log(f"warning: removing {action}: {e}")
