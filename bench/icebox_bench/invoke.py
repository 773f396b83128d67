"""One blocking invocation, turned into the fields of an invocations.jsonl line.

Statuses: `success`, `application_error`, `developer_error`, `internal_error` (the activation
record's statusCode 0..3); `rejected` (429, the daemon's queue was full); `http_error` (any
other answer without an activation record, e.g. 404 for a missing action); `connection_error`
(iceboxd unreachable or the connection dropped); `timeout` (no answer in time).
"""

from __future__ import annotations

import asyncio
import time

from .client import DaemonUnreachable, IceboxClient, IceboxError, annotation

RECORD_STATUSES = ("success", "application_error", "developer_error", "internal_error")
STATUSES = RECORD_STATUSES + ("rejected", "http_error", "connection_error", "timeout")
# How long after the action's own time limit a 202 (still running) activation is polled for.
_POLL_MARGIN_S = 30.0


def from_record(record: dict) -> dict:
    """The fields an activation record contributes."""
    code = record.get("statusCode")
    if not isinstance(code, int):
        code = (record.get("response") or {}).get("statusCode", 3)
    fields = {
        "status": RECORD_STATUSES[code] if 0 <= code < len(RECORD_STATUSES) else "internal_error",
        "activation_id": record.get("activationId"),
        "start_kind": annotation(record, "icebox.start"),
        "instance": annotation(record, "icebox.instance"),
        "duration_ms": record.get("duration"),
        "wait_ms": annotation(record, "waitTime"),
        "init_ms": annotation(record, "initTime"),
        "daemon_start_ms": record.get("start"),
        "daemon_end_ms": record.get("end"),
    }
    if fields["status"] != "success":
        result = (record.get("response") or {}).get("result")
        if isinstance(result, dict) and "error" in result:
            fields["error"] = str(result["error"])[:500]
        # The daemon's machine-readable reason (its `ErrorKind`); absent from older daemons.
        kind = annotation(record, "icebox.error")
        if kind is not None:
            fields["error_kind"] = kind
    return fields


async def _poll(client: IceboxClient, activation_id: str, deadline: float) -> dict | None:
    while time.monotonic() < deadline:
        record = await client.activation(activation_id)
        if record is not None:
            return record
        await asyncio.sleep(0.5)
    return None


async def invoke_once(client: IceboxClient, action: str, params: dict, *, action_timeout_ms: int | None = None) -> dict:
    """Invoke blocking; returns start_ms/end_ms (client clock), latency_ms, status, and the
    record's fields. Never raises for a failed invocation: failure is a status."""
    start = time.time()
    t0 = time.monotonic()
    out: dict = {"start_ms": round(start * 1000.0, 3)}
    try:
        reply = await client.invoke(action, params, blocking=True)
        if reply.status == 202 and isinstance(reply.body, dict) and reply.body.get("activationId"):
            # Still running after the blocking wait: fetch the record when it is done.
            limit_s = (action_timeout_ms or 600_000) / 1000.0 + _POLL_MARGIN_S
            record = await _poll(client, reply.body["activationId"], t0 + limit_s)
            if record is None:
                out.update(
                    status="timeout",
                    activation_id=reply.body["activationId"],
                    error=f"no activation record {limit_s:.0f} s after the invocation",
                )
            else:
                out.update(from_record(record))
                out["end_ms"] = record.get("end")
        elif isinstance(reply.body, dict) and "activationId" in reply.body and "annotations" in reply.body:
            out.update(from_record(reply.body))
        elif reply.status == 429:
            out.update(status="rejected", error=reply.error_message())
        else:
            out.update(status="http_error", error=reply.error_message())
        out["http_status"] = reply.status
    except DaemonUnreachable as e:
        out.update(status="connection_error", error=str(e))
    except IceboxError as e:
        out.update(status="timeout" if "did not answer" in str(e) else "connection_error", error=str(e))
    if "end_ms" in out:
        # Polled to completion: the record's end (same host clock) is when it really ended.
        out["latency_ms"] = round(out["end_ms"] - out["start_ms"], 3)
    else:
        out["latency_ms"] = round((time.monotonic() - t0) * 1000.0, 3)
        out["end_ms"] = round(out["start_ms"] + out["latency_ms"], 3)
    return out
