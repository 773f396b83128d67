"""What one soak request ended as: a kind (the HTTP status with the activation's status, or
the client-side failure) and a category that says whose fault it is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

OK = "ok"
# The instance serving the request was SIGKILLed by the soak: the daemon answers 502 with an
# activation whose status is "action developer error" (OpenWhisk's answer for a runtime that
# died), which is the correct outcome, not a daemon failure. The record's `icebox.instance`
# annotation must name an instance the soak killed; a developer error elsewhere is "other".
INSTANCE_KILLED = "instance killed"
# What the soak exists to catch: the daemon itself failed.
DAEMON_FAILURE = "daemon failure"
# Neither: throttling (429), blocking wait over (202), an application error of the action.
OTHER = "other"

CATEGORIES = (OK, INSTANCE_KILLED, DAEMON_FAILURE, OTHER)

TIMEOUT = "timeout"
CONNECTION_ERROR = "connection error"


@dataclass(frozen=True)
class Outcome:
    kind: str
    category: str
    message: str = ""


def activation_status(body) -> str | None:
    """`response.status` of an activation record (a blocking invoke without result=true)."""
    if isinstance(body, dict) and isinstance(body.get("response"), dict):
        status = body["response"].get("status")
        return status if isinstance(status, str) else None
    return None


def error_message(body) -> str:
    """The error text of an error answer or of a failed activation's result."""
    if isinstance(body, dict):
        if isinstance(body.get("error"), str):
            return body["error"]
        result = body.get("response", {}).get("result") if isinstance(body.get("response"), dict) else None
        if isinstance(result, dict) and "error" in result:
            return str(result["error"])
        return ""
    return str(body or "")[:200]


def annotation(body, key: str):
    if isinstance(body, dict):
        for kv in body.get("annotations") or []:
            if isinstance(kv, dict) and kv.get("key") == key:
                return kv.get("value")
    return None


def classify(
    status: int | None, body=None, failure: str | None = None, killed: Mapping[str, str] | None = None
) -> Outcome:
    """`failure` is TIMEOUT or CONNECTION_ERROR when no answer came (then `status` is None).
    `killed` maps the instances the soak killed so far to their state when listed."""
    if failure is not None:
        return Outcome(failure, DAEMON_FAILURE, str(body or "")[:200])
    act = activation_status(body)
    kind = f"{status} {act}" if act else str(status)
    message = error_message(body)
    if status == 200 and act == "success":
        return Outcome(kind, OK)
    if status == 502 and act == "action developer error":
        instance = annotation(body, "icebox.instance") or ""
        if instance in (killed or {}):
            return Outcome(f"{kind}, instance killed while {killed[instance]}", INSTANCE_KILLED, message)
        return Outcome(f"{kind}, instance {'not killed by the soak' if instance else 'unknown'}", OTHER, message)
    if status is not None and status >= 500 and status != 502:
        return Outcome(kind, DAEMON_FAILURE, message)
    if status == 502 and act is None:
        # A 502 without an activation is not the action's: a proxy-less gateway error.
        return Outcome(kind, DAEMON_FAILURE, message)
    return Outcome(kind, OTHER, message)
