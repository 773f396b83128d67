"""What every Desiccant recipe does to actions and instances.

* An action's reclaim mode is its `icebox.reclaim` annotation (vanilla, eager, desiccant),
  which overrides the node's `--reclaim-mode`: one daemon can then hold instances of all
  three modes side by side, measured under the same conditions.
* "Frozen" is checked, not assumed: after an invocation the instance is idle for the pause
  grace, then frozen; the paper measures frozen instances.
* Reclaims are triggered explicitly (POST /icebox/v1/instances/{id}/reclaim), so a recipe
  never depends on when the policy would have acted.
"""

from __future__ import annotations

import asyncio
import time

from ..client import ApiError, IceboxClient, IceboxError
from ..deploy import action_body, put_body
from ..manifest import FunctionSpec

MODES = ("vanilla", "eager", "desiccant")
RECLAIM_ANNOTATION = "icebox.reclaim"
# How long an instance may take to be frozen after its invocation returned: the pause grace
# (50 ms by default) plus the daemon's bookkeeping, with a wide margin for a loaded machine.
FREEZE_TIMEOUT_S = 15.0
_POLL_S = 0.05


class ProtocolError(RuntimeError):
    """The experiment could not be carried out as defined (the message says which step)."""


def mode_action_body(spec: FunctionSpec, mode: str | None, memory_mb: int | None = None) -> dict:
    """The action body of `spec` with its reclaim mode annotation and, if given, a memory limit
    overriding the manifest's (Fig. 9–10 use 256 MB for every function)."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown reclaim mode {mode!r}; expected one of {', '.join(MODES)}")
    body = action_body(spec)
    if mode is not None:
        body["annotations"] = [{"key": RECLAIM_ANNOTATION, "value": mode}]
    if memory_mb is not None:
        body.setdefault("limits", {})["memory"] = int(memory_mb)
    return body


async def deploy_mode(
    client: IceboxClient, spec: FunctionSpec, action: str, mode: str | None, memory_mb: int | None = None
) -> dict:
    """Create or update `action` (a new version: no older instance serves it)."""
    return await put_body(client, action, mode_action_body(spec, mode, memory_mb), f"{spec.name} as {action}")


async def delete_quietly(client: IceboxClient, actions, log=print) -> None:
    """Delete actions (which evicts their instances); a failure is only a warning."""
    for action in actions:
        try:
            await client.delete_action(action)
        except IceboxError as e:
            log(f"warning: could not delete {action}: {e}")


async def wait_frozen(client: IceboxClient, instance: str, timeout_s: float = FREEZE_TIMEOUT_S) -> dict:
    """The instance's view, memory measured now, once it is frozen."""
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        view = await client.instance(instance)
        state = view.get("state")
        if state == "frozen":
            return await client.instance(instance, fresh=True)
        await asyncio.sleep(_POLL_S)
    raise ProtocolError(f"instance {instance} was not frozen {timeout_s:.0f} s after its invocation (state {state})")


def check_mode(view: dict, mode: str) -> None:
    """The daemon must report the mode the action asked for (older daemons report none)."""
    reported = view.get("reclaim_mode")
    if reported and reported != mode:
        raise ProtocolError(
            f"instance {view.get('id')} runs in reclaim mode {reported!r}, not {mode!r}: "
            f"the daemon ignored the {RECLAIM_ANNOTATION} annotation"
        )


async def reclaim(client: IceboxClient, instance: str, variant: str | None = None, *, busy_retries: int = 20) -> dict:
    """Reclaim one idle instance now; returns the daemon's report. A 409 (busy: the policy is
    reclaiming it, or a straggling invocation) is retried briefly."""
    params = {"variant": variant} if variant else None
    path = f"/icebox/v1/instances/{instance}/reclaim"
    for _ in range(busy_retries):
        reply = await client.request("POST", path, params=params, timeout_s=120.0)
        if reply.status == 200 and isinstance(reply.body, dict):
            return reply.body
        if reply.status != 409:
            raise ApiError("POST", path, reply.status, reply.error_message())
        await asyncio.sleep(0.1)
    raise ProtocolError(f"instance {instance} stayed busy; the reclaim could not start")


def memory_of(view: dict) -> dict:
    """{uss, pss, rss, swap} of an instance view, in bytes."""
    mem = view.get("memory") or {}
    return {m: int(mem.get(m, 0) or 0) for m in ("uss", "pss", "rss", "swap")}


async def wait_gone(client: IceboxClient, instances, timeout_s: float = 30.0) -> None:
    """Wait until none of `instances` is listed any more (deleting an action evicts its
    instances asynchronously): memory sharing between instances depends on who is alive."""
    wanted = set(instances)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = {view.get("id") for view in await client.instances()}
        if not wanted & alive:
            return
        await asyncio.sleep(_POLL_S)
    raise ProtocolError(
        f"instances {sorted(wanted & alive)} were still alive {timeout_s:.0f} s after their actions were deleted"
    )
