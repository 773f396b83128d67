"""The snapshot-restore protocol (FaaSnap §6.1, through the daemon).

Per function, one action per restore mode (`sr-<function>-<mode>`, annotations
`icebox.snapshot: true` and `icebox.snapshot_restore: <mode>`) and one without a snapshot
(`sr-<function>-start`), all with the function's code and limits:

1. **Record phase.** Each snapshot is built by the daemon on deployment (a template instance,
   `/init`, CRIU dump); when it is ready, one invocation with input A restores it — in `record`
   mode for `reap` and `faasnap`, which builds the loading set from that invocation's page
   accesses (waited for) — and its instance is evicted. The normal action gets one untimed cold
   start with input A too.
2. **Test phase**, `repetitions` rounds; each round takes every (mode, variant) and the normal
   start once, in an order rotated by one per round. One measured cold start: the snapshot's
   files dropped from the page cache (`cold`) or read in full (`cached`), their residency
   read back (mincore); a blocking invocation with input B (timed by the client; the record
   must say `icebox.start = cold` and `icebox.restore = <mode>`); after `memory_settle_s` the
   instance's memory (`GET /icebox/v1/instances/{id}?fresh=true`: USS, PSS, RSS) and the
   restore's account (`restore_stats`); then `DELETE /icebox/v1/instances/{id}`, so the next
   invocation of the action must restore again (an update would discard the snapshot).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..client import ApiError, IceboxClient, IceboxError, annotation
from ..deploy import action_body, put_body
from ..invoke import from_record
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from . import locate, pagecache

MODES = ("eager", "lazy", "reap", "faasnap")
VARIANTS = ("cold", "cached")
START = "start"
NEEDS_LOADING_SET = ("reap", "faasnap")
READY_TIMEOUT_S = 300.0
RECORDED_TIMEOUT_S = 60.0
_POLL_S = 0.1


class ProtocolError(RuntimeError):
    """A step of the protocol did not go as defined (the message says which)."""


@dataclass
class Subject:
    """One action of a function: its snapshot restored in `mode`, or started normally (START)."""

    spec: FunctionSpec
    mode: str
    action: str
    version: str = ""
    fqn: str = ""
    snapshot: dict = field(default_factory=dict)
    directory: Path | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def restored(self) -> bool:
        return self.mode != START


def action_name(function: str, mode: str) -> str:
    return f"sr-{function}-{mode}"


def subject_body(spec: FunctionSpec, mode: str) -> dict:
    body = action_body(spec)
    if mode != START:
        body["annotations"] = [
            {"key": "icebox.snapshot", "value": True},
            {"key": "icebox.snapshot_restore", "value": mode},
        ]
    return body


def schedule(modes: list[str], variants: list[str], rounds: int) -> list[list[tuple[str, str]]]:
    """Per round, the (mode, variant) cold starts in order, the normal start as (START, "-");
    the order rotates by one each round, so no mode always follows the same one."""
    one = [(m, v) for m in modes for v in variants] + [(START, "-")]
    return [one[r % len(one) :] + one[: r % len(one)] for r in range(rounds)]


async def _snapshot_view(client: IceboxClient, s: Subject) -> dict | None:
    for v in await client.call("GET", "/icebox/v1/snapshots"):
        if v.get("action") == s.fqn and v.get("version") == s.version:
            return v
    return None


async def _wait_snapshot(client: IceboxClient, s: Subject, done, what: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    view = None
    while time.monotonic() < deadline:
        view = await _snapshot_view(client, s)
        if view is not None and view.get("state") == "failed":
            raise ProtocolError(f"{s.action}: the snapshot failed: {view.get('reason')}")
        if view is not None and done(view):
            return view
        await asyncio.sleep(_POLL_S)
    raise ProtocolError(f"{s.action}: {what} within {timeout_s:.0f} s (last view: {view})")


async def evict(client: IceboxClient, instance: str) -> None:
    """DELETE the idle instance (404: already gone); 409 (still busy) is retried for 10 s."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            await client.call("DELETE", f"/icebox/v1/instances/{instance}", ok=(200, 404))
            return
        except ApiError as e:
            if e.status != 409 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def invoke_cold(client: IceboxClient, s: Subject, params: dict, expect_restore: str | None) -> dict:
    """One blocking invocation that must be a successful cold start, restored in
    `expect_restore` (None: a normal start). The record's fields, client latency, restore."""
    t0 = time.perf_counter()
    reply = await client.invoke(s.action, params, blocking=True)
    latency_ms = (time.perf_counter() - t0) * 1000.0
    record = reply.body if isinstance(reply.body, dict) else {}
    if "annotations" not in record:
        raise ProtocolError(f"{s.action}: no activation record ({reply.status}): {reply.error_message()}")
    out = {**from_record(record), "latency_ms": round(latency_ms, 3), "restore": annotation(record, "icebox.restore")}
    if out["status"] != "success":
        raise ProtocolError(f"{s.action}: the activation failed: {out.get('error')}")
    if out["start_kind"] != "cold":
        raise ProtocolError(f"{s.action}: expected a cold start, the record says {out['start_kind']!r}")
    if out["restore"] != expect_restore:
        raise ProtocolError(
            f"{s.action}: expected icebox.restore = {expect_restore!r}, the record says "
            f"{out['restore']!r}"
            + (" (the restore failed and the daemon started normally?)" if out["restore"] is None else "")
        )
    return out


def invocation_line(sample: dict, phase: str) -> dict:
    """The invocations.jsonl line of a cold start (docs/bench.md: recipes carry `phase` and
    `iteration`)."""
    keys = (
        "function",
        "mode",
        "variant",
        "status",
        "activation_id",
        "start_kind",
        "restore",
        "instance",
        "latency_ms",
        "duration_ms",
        "wait_ms",
        "init_ms",
        "daemon_start_ms",
        "daemon_end_ms",
    )
    return {"phase": phase, "iteration": sample.get("round"), **{k: sample.get(k) for k in keys}}


async def prepare(
    client: IceboxClient, spec: FunctionSpec, modes: list[str], state: Path | None, invocations: JsonlWriter, log
) -> list[Subject]:
    """Deploy the function's actions and run the record phase; the subjects, ready to measure."""
    subjects = [Subject(spec, m, action_name(spec.name, m)) for m in [*modes, START]]
    for s in subjects:
        action = await put_body(client, s.action, subject_body(spec, s.mode), f"{spec.name} ({s.mode})")
        s.version, s.fqn = action["version"], f"{action['namespace']}/{action['name']}"
    for s in subjects:
        if s.restored:
            await _wait_snapshot(
                client, s, lambda v: v.get("state") == "ready", "no snapshot was ready", READY_TIMEOUT_S
            )
        first = await invoke_cold(
            client, s, spec.input("A"), None if not s.restored else "record" if s.mode in NEEDS_LOADING_SET else s.mode
        )
        invocations.write(invocation_line({"function": spec.name, "mode": s.mode, **first}, "record"))
        if s.mode in NEEDS_LOADING_SET:
            await _wait_snapshot(
                client,
                s,
                lambda v: v.get("loading_set") is not None,
                "the recording restore produced no loading set",
                RECORDED_TIMEOUT_S,
            )
        stats = (await client.instance(first["instance"])).get("restore_stats") if s.restored else None
        await evict(client, first["instance"])
        if s.restored:
            s.snapshot = await _snapshot_view(client, s) or {}
            s.directory = locate.snapshot_dir(stats, s.fqn, s.version, state)
            s.files = pagecache.files_under(s.directory)
            log(
                f"{s.action}: snapshot {pagecache.size_bytes(s.files) / 2**20:.1f} MiB in {len(s.files)} files"
                + (
                    f", loading set {s.snapshot['loading_set']['loading_set_pages']} pages"
                    if s.snapshot.get("loading_set")
                    else ""
                )
            )
    return subjects


async def measure_one(client: IceboxClient, s: Subject, variant: str, params: dict, settle_s: float) -> dict:
    """One measured cold start of `s` (see the module's protocol); the sample."""
    sample: dict = {"function": s.spec.name, "mode": s.mode, "variant": variant}
    if s.restored:
        if variant == "cold":
            await asyncio.to_thread(pagecache.drop, s.files)
        else:
            await asyncio.to_thread(pagecache.load, s.files)
        cached, pages = await asyncio.to_thread(pagecache.resident, s.files)
        sample.update(resident_pages=cached, snapshot_pages=pages)
    sample.update(await invoke_cold(client, s, params, s.mode if s.restored else None))
    await asyncio.sleep(settle_s)
    try:
        view = await client.instance(sample["instance"], fresh=True)
        memory = view.get("memory") or {}
        sample.update(
            uss=memory.get("uss"), pss=memory.get("pss"), rss=memory.get("rss"), restore_stats=view.get("restore_stats")
        )
    finally:
        await evict(client, sample["instance"])
    used = (sample.get("restore_stats") or {}).get("snapshot")
    if s.restored and used and s.directory is not None and Path(used).parent != s.directory:
        raise ProtocolError(
            f"{s.action}: restored from {used}, not from the snapshot whose files were "
            f"{'dropped' if variant == 'cold' else 'cached'} ({s.directory})"
        )
    return sample


async def measure_function(
    client: IceboxClient,
    spec: FunctionSpec,
    modes: list[str],
    variants: list[str],
    rounds: int,
    state: Path | None,
    settle_s: float,
    samples: JsonlWriter,
    invocations: JsonlWriter,
    log,
) -> tuple[list[dict], dict[str, dict]]:
    """The record phase, then `rounds` rounds of the test phase; every sample goes to
    `samples` (JSONL) as it is taken, and its invocation to `invocations`. Returns the samples
    and, per mode, what its snapshot is (snapshot_facts)."""
    try:
        subjects = {s.mode: s for s in await prepare(client, spec, modes, state, invocations, log)}
        params = spec.input("B")
        taken = []
        for r, order in enumerate(schedule(modes, variants, rounds)):
            for mode, variant in order:
                sample = await measure_one(client, subjects[mode], variant, params, settle_s)
                sample["round"] = r
                samples.write(sample)
                invocations.write(invocation_line(sample, "test"))
                taken.append(sample)
            log(f"{spec.name}: round {r + 1}/{rounds} done")
        return taken, {s.mode: snapshot_facts(s) for s in subjects.values() if s.restored}
    finally:
        # Also after a failure: the actions (and their snapshots' files) go.
        for mode in [*modes, START]:
            try:
                await client.delete_action(action_name(spec.name, mode))
            except IceboxError as e:
                log(f"warning: could not delete {action_name(spec.name, mode)}: {e}")


def snapshot_facts(s: Subject) -> dict:
    """The snapshot as the daemon describes it, and its files' size on disk."""
    info = s.snapshot.get("snapshot") or {}
    return {
        "files": len(s.files),
        "disk_bytes": pagecache.size_bytes(s.files),
        "memory_bytes": info.get("memory_bytes"),
        "took_ms": info.get("took_ms"),
        "loading_set": s.snapshot.get("loading_set"),
    }
