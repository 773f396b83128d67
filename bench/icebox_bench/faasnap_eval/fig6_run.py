"""faasnap-fig6's protocol against a live iceboxd with VM backends.

Per function and panel (record input → test input), one action per mode, all in `vm`
isolation with `icebox.snapshot: "warm"` (the template runs the record input once before it is
snapshotted: the paper's snapshot holds the warm state of a first invocation) and the mode in
`icebox.snapshot_restore` (`cached` is a lazy restore whose files were read into the page cache
first). REAP and FaaSnap actions record their loading set on their first restore, invoked with
the record input. Then, repetition by repetition and mode by mode: every instance of the
action evicted (so the next invocation is a cold start served by a restore), the snapshot's
files dropped from the page cache (or filled, for `cached`), one invocation with the test input
timed from the client."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ..client import IceboxClient, IceboxError, annotation
from ..deploy import action_body, put_body
from ..manifest import FunctionSpec
from . import pagecache

SNAPSHOT_WAIT_S = 600.0
LOADSET_WAIT_S = 120.0
INVOKE_TIMEOUT_S = 300.0


def action_name(function: str, mode: str, panel: str) -> str:
    return f"fs6-{function}-{mode}-{panel.replace('->', '').lower()}"


def restore_mode(mode: str) -> str:
    return "lazy" if mode == "cached" else mode


def body(spec: FunctionSpec, mode: str, record_input: str, snapshot: str) -> dict:
    b = action_body(spec)
    annotations = [
        {"key": "icebox.isolation", "value": "vm"},
        {"key": "icebox.snapshot", "value": snapshot if snapshot == "warm" else True},
        {"key": "icebox.snapshot_restore", "value": restore_mode(mode)},
    ]
    if snapshot == "warm":
        annotations.append({"key": "icebox.snapshot_warmup", "value": spec.input(record_input)})
    b["annotations"] = annotations
    return b


async def snapshot_views(client: IceboxClient) -> dict[str, dict]:
    views = await client.call("GET", "/icebox/v1/snapshots")
    return {v["action"].split("/", 1)[1]: v for v in views}


async def wait_snapshots(client: IceboxClient, names: list[str], log, timeout_s: float = SNAPSHOT_WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        views = await snapshot_views(client)
        failed = {n: views[n].get("reason") for n in names if n in views and views[n]["state"] == "failed"}
        if failed:
            raise RuntimeError(f"snapshots failed: {failed}")
        pending = [n for n in names if views.get(n, {}).get("state") != "ready"]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"snapshots not ready after {timeout_s:.0f} s: {pending}")
        await asyncio.sleep(1.0)


async def evict(client: IceboxClient, name: str) -> None:
    """Every instance of the action goes, so its next invocation is a cold start."""
    for inst in await client.instances():
        if inst["action"].split("/", 1)[1] == name:
            await client.call("DELETE", f"/icebox/v1/instances/{inst['id']}", ok=(200, 404))


def snapshot_files(state_dir: Path, name: str) -> list[Path]:
    dirs = {a.split("/", 1)[1]: d for a, d in pagecache.snapshot_dirs(state_dir).items()}
    if name not in dirs:
        raise RuntimeError(f"no snapshot files for {name} under {state_dir}/snapshots")
    return pagecache.files(dirs[name])


async def invoke_once(client: IceboxClient, name: str, params: dict) -> dict:
    """One blocking invocation, timed at the client, with whether a restore served it."""
    t0 = time.perf_counter()
    reply = await client.invoke(name, params, timeout_s=INVOKE_TIMEOUT_S)
    latency_ms = (time.perf_counter() - t0) * 1000.0
    record = reply.body if isinstance(reply.body, dict) else {}
    ok = reply.status == 200 and bool((record.get("response") or {}).get("success"))
    instance = annotation(record, "icebox.instance")
    view = (await snapshot_views(client)).get(name, {})
    last = view.get("last_restore") or {}
    restored = bool(instance) and last.get("instance") == instance
    stats = None
    if restored:
        try:
            stats = (await client.instance(instance)).get("restore_stats")
        except IceboxError:
            stats = None  # gone already: the figures are only a breakdown
    return {
        "ok": ok,
        "status": reply.status,
        "error": None if ok else reply.error_message(),
        "latency_ms": round(latency_ms, 3),
        "duration_ms": record.get("duration"),
        "start": annotation(record, "icebox.start"),
        "instance": instance,
        "restored": restored,
        "restore_mode": last.get("mode") if restored else None,
        "restore_ms": last.get("ms") if restored else None,
        # The backend's account of the restore: its steps, the loader, the page cache then.
        "restore_stats": stats,
    }


async def record(client: IceboxClient, state_dir: Path, name: str, params: dict, log) -> dict:
    """The first restore of a REAP/FaaSnap action records its loading set (input A)."""
    await evict(client, name)
    pagecache.drop(snapshot_files(state_dir, name))
    sample = await invoke_once(client, name, params)
    if not sample["ok"] or sample["restore_mode"] != "record":
        raise RuntimeError(f"{name}: the recording invocation was not a record-mode restore: {sample}")
    deadline = time.monotonic() + LOADSET_WAIT_S
    while (await snapshot_views(client)).get(name, {}).get("loading_set") is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: no loading set {LOADSET_WAIT_S:.0f} s after its recording")
        await asyncio.sleep(0.5)
    loading_set = (await snapshot_views(client))[name]["loading_set"]
    await evict(client, name)
    log(f"  {name}: recorded in {sample['latency_ms']:.0f} ms, loading set {loading_set}")
    return {"action": name, "latency_ms": sample["latency_ms"], "loading_set": loading_set}


def qemu_io(pids: list[int]) -> dict:
    """What the VM's QEMU paid in paging since it started: major faults (a page not in the
    cache, so a disk read) and bytes it made the disk read (its loader's reads are the daemon's)."""
    out = {"majflt": None, "read_bytes": None}
    for pid in pids[:1]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            out["majflt"] = int(stat[stat.rindex(")") + 2 :].split()[9])
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("read_bytes:"):
                    out["read_bytes"] = int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return out


async def measure(client: IceboxClient, state_dir: Path, name: str, mode: str, params: dict) -> dict:
    await evict(client, name)
    paths = snapshot_files(state_dir, name)
    if mode == "cached":
        pagecache.fill(paths)
    else:
        pagecache.drop(paths)
    cached_before = pagecache.resident_bytes(paths)
    sample = await invoke_once(client, name, params)
    if sample["instance"]:
        try:
            sample.update(qemu_io((await client.instance(sample["instance"]))["pids"]))
        except IceboxError:
            pass
    sample["cached_bytes_before"] = cached_before
    sample["snapshot_bytes"] = sum(p.stat().st_size for p in paths)
    return sample


async def run_function(
    client: IceboxClient,
    state_dir: Path,
    spec: FunctionSpec,
    *,
    modes: list[str],
    record_input: str,
    test_input: str,
    repetitions: int,
    snapshot: str,
    panel: str,
    log,
) -> tuple[list[dict], list[dict]]:
    names = {mode: action_name(spec.name, mode, panel) for mode in modes}
    for mode, name in names.items():
        await put_body(client, name, body(spec, mode, record_input, snapshot), f"{spec.name} ({mode})")
    try:
        await wait_snapshots(client, list(names.values()), log)
        records = []
        for mode, name in names.items():
            if restore_mode(mode) in ("reap", "faasnap"):
                records.append(await record(client, state_dir, name, spec.input(record_input), log))
        samples = []
        for rep in range(repetitions):
            for mode, name in names.items():
                s = await measure(client, state_dir, name, mode, spec.input(test_input))
                s.update({"function": spec.name, "mode": mode, "panel": panel, "rep": rep})
                log(
                    f"  {spec.name} {panel} {mode} #{rep}: {s['latency_ms']:.0f} ms"
                    f" (restore {s['restore_ms']} ms, {s['restore_mode'] or 'NOT restored'},"
                    f" QEMU {s.get('majflt')} major faults, {(s.get('read_bytes') or 0) >> 20} MiB read,"
                    f" cached before {s['cached_bytes_before']} B){'' if s['ok'] else ' FAILED: ' + str(s['error'])}"
                )
                samples.append(s)
        return samples, records
    finally:
        for name in names.values():
            try:
                await evict(client, name)
                await client.delete_action(name)
            except IceboxError as e:
                log(f"warning: cannot remove {name}: {e}")
