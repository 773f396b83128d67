"""Process snapshots through the node API (docs/snapshots.md): whether a daemon takes them, an
action's snapshot and its state, waiting for it to be ready or recorded, and evicting an idle
instance so that the next invocation must start (here: restore) a new one."""

from __future__ import annotations

import time

from .client import Client, HttpError

SNAPSHOTS = "/icebox/v1/snapshots"
SNAPSHOT_ANNOTATION = {"key": "icebox.snapshot", "value": True}
# Building a snapshot starts a template instance, /inits it and dumps it (a JVM: ~1–2 s);
# recording the first restore's accesses ends after that activation, in the background.
READY_TIMEOUT_S = 120.0
RECORDED_TIMEOUT_S = 30.0
_POLL_S = 0.05


class SnapshotError(RuntimeError):
    """The action's snapshot was not built, or not recorded, as the benchmark needs."""


def unavailable_reason(health: dict) -> str | None:
    """Why a daemon (its /icebox/v1/health) cannot restore process instances from snapshots,
    or None when it can."""
    for iso in health.get("isolations") or []:
        if iso.get("isolation") == "process":
            if iso.get("snapshots"):
                return None
            return (
                f"the process backend ({iso.get('backend') or 'none'}) takes no snapshots on this node "
                "(they need root, crun isolation and CRIU >= 4.1: scripts/setup.sh builds it)"
            )
    return "the daemon reports no process isolation (an iceboxd without snapshots?)"


def view_of(views: list[dict], name: str, version: str | None = None) -> dict | None:
    """The snapshot view of action `name` (any namespace; `GET /icebox/v1/snapshots` names
    actions `namespace/name`), of `version` if given."""
    for v in views:
        if str(v.get("action", "")).rpartition("/")[2] == name and (version is None or v.get("version") == version):
            return v
    return None


def _poll(client: Client, name: str, version: str | None, done, what: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    view = None
    while time.monotonic() < deadline:
        view = view_of(client.get_json(SNAPSHOTS), name, version)
        if view is not None and view.get("state") == "failed":
            raise SnapshotError(f"the snapshot of {name} failed: {view.get('reason')}")
        if view is not None and done(view):
            return view
        time.sleep(_POLL_S)
    raise SnapshotError(f"{name}: {what} within {timeout_s:.0f} s (last view: {view})")


def wait_ready(client: Client, name: str, version: str | None = None, timeout_s: float = READY_TIMEOUT_S) -> dict:
    """Poll until the action's snapshot is ready; its view."""
    return _poll(client, name, version, lambda v: v.get("state") == "ready", "no snapshot was ready", timeout_s)


def wait_recorded(client: Client, name: str, version: str | None = None, timeout_s: float = RECORDED_TIMEOUT_S) -> dict:
    """Poll until the snapshot has its loading set (the first restore's activation recorded)."""
    return _poll(
        client,
        name,
        version,
        lambda v: v.get("loading_set") is not None,
        "the first restore's recording did not produce a loading set",
        timeout_s,
    )


def evict(client: Client, instance: str) -> None:
    """DELETE /icebox/v1/instances/{id}: the idle instance goes now. A 404 (already gone) is
    fine; a 409 (still running an activation) is retried briefly."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            client.call("DELETE", f"/icebox/v1/instances/{instance}", ok=(200, 404))
            return
        except HttpError as e:
            if e.reply.status != 409 or time.monotonic() > deadline:
                raise
            time.sleep(_POLL_S)
