"""The papers' "n times in the same instance" protocol: sequential blocking invocations of one
action and the instance's memory measured right after each exit (GET ?fresh=true, so the
number is read then, not the daemon's last periodic sample)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .client import IceboxClient, IceboxError
from .invoke import invoke_once
from .recorder import JsonlWriter

MEASURES = ("uss", "pss", "rss", "swap")


class LoopError(RuntimeError):
    pass


def exit_record(iteration: int, fields: dict, view: dict) -> dict:
    mem = view.get("memory") or {}
    return {
        "iteration": iteration,
        "instance": view.get("id"),
        "state": view.get("state"),
        **{m: mem.get(m, 0) for m in MEASURES},
        "measured_at_ms": view.get("measured_at_ms"),
        "latency_ms": fields.get("latency_ms"),
        "duration_ms": fields.get("duration_ms"),
        "start_kind": fields.get("start_kind"),
        "status": fields.get("status"),
    }


async def run_loop(
    client: IceboxClient,
    action: str,
    params: dict,
    n: int,
    *,
    invocations: JsonlWriter | None = None,
    exits: JsonlWriter | None = None,
    timeout_ms: int | None = None,
    strict: bool = True,
    after_exit: Callable[[int, dict, dict], Awaitable[None]] | None = None,
    function: str | None = None,
    tags: dict | None = None,
    log=print,
) -> list[dict]:
    """Run `n` invocations; returns one exit record per iteration.

    Every invocation must succeed and, with `strict`, run on the first one's instance (else
    LoopError: the protocol is broken, e.g. the instance was evicted). `after_exit(i, fields,
    record)` runs after the memory was read, before the next invocation. `tags` are added to
    every line written.
    """
    tags = tags or {}
    records: list[dict] = []
    instance: str | None = None
    for i in range(1, n + 1):
        fields = await invoke_once(client, action, params, action_timeout_ms=timeout_ms)
        if invocations is not None:
            invocations.write({"function": function or action, "action": action, **tags, "iteration": i, **fields})
        if fields["status"] != "success":
            raise LoopError(f"{action}: invocation {i} of {n} failed ({fields['status']}): {fields.get('error', '')}")
        if instance is None:
            instance = fields["instance"]
        elif fields["instance"] != instance:
            message = f"{action}: invocation {i} ran on instance {fields['instance']}, not {instance} (evicted?)"
            if strict:
                raise LoopError(message)
            log(f"warning: {message}")
            instance = fields["instance"]
        try:
            view = await client.instance(instance, fresh=True)
        except IceboxError as e:
            raise LoopError(f"{action}: cannot measure instance {instance} after invocation {i}: {e}") from None
        record = exit_record(i, fields, view)
        if exits is not None:
            exits.write({"function": function or action, **tags, **record})
        records.append(record)
        if after_exit is not None:
            await after_exit(i, fields, record)
    return records
