"""squeezy-fig10's protocol: per memory mode, two replays of the same trace slice, each with a
fresh iceboxd (daemon flags cannot change while it runs):

* **abundant**: no --vm-memory; the run's peak of plugged partition memory is recorded;
* **pressure**: --vm-memory = `pressure_fraction` of that peak, rounded down to whole
  partitions (at least one), so that scale-ups wait for idle instances to be evicted and their
  partitions unplugged — how fast a mode reclaims then shows in the tail. Without a measured
  peak: `pressure_fraction` x partitions x functions x the partition size.

Every function is deployed with `icebox.isolation: vm-shared` and the same memory limit, and
invoked once before the replay (that boots its VM; excluded from the figures). The trace slice
comes from the Azure 2019 per-minute counts: the trace functions with the burstiest minutes
(peak over mean) whose peak stays within what TCG VMs serve, played `scale` times faster. Each
run's directory (runs/<mode>-<scenario>/) is a complete run directory plus plugged.jsonl (the
daemon's plugged-memory gauge, when it has one) and iceboxd.log."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .. import schedule as schedule_mod
from ..client import IceboxClient, IceboxError
from ..daemon import Daemon
from ..deploy import action_body, put_body
from ..invoke import invoke_once
from ..manifest import FunctionSpec
from ..openloop import OpenLoop
from ..promtext import parse_metrics
from ..recorder import RunDir, read_jsonl
from ..session import RunSession
from ..traces.model import Trace

MIB = 1 << 20


def pick_bursty(trace: Trace, start_min: int, minutes: int, n: int, *, min_peak: int, max_peak: int) -> list[str]:
    """The n trace functions whose busiest minute stands out most over their mean in the window,
    among those whose peak minute is in [min_peak, max_peak] and that are idle some minutes
    (idle gaps are what let keep-alive evict instances). Ties: more invocations first."""
    per: dict[str, Counter] = defaultdict(Counter)
    for inv in trace.invocations:
        m = int(inv.time_s // 60)
        if start_min <= m < start_min + minutes:
            per[inv.function][m] += 1
    ranked = []
    for fn, counts in per.items():
        total, peak = sum(counts.values()), max(counts.values())
        if min_peak <= peak <= max_peak and len(counts) < minutes:
            ranked.append((-peak * minutes / total, -total, fn))
    return [fn for *_, fn in sorted(ranked)[:n]]


def pressure_budget(peak_bytes: float, fraction: float, partition_bytes: int) -> int:
    """`fraction` of the peak, in whole partitions, at least one."""
    return max(int(peak_bytes * fraction // partition_bytes), 1) * partition_bytes


def vm_shared_body(spec: FunctionSpec, memory_mb: int) -> dict:
    body = action_body(spec)
    body.setdefault("limits", {})["memory"] = memory_mb
    body["annotations"] = [{"key": "icebox.isolation", "value": "vm-shared"}]
    return body


@dataclass
class Plan:
    specs: list[FunctionSpec]
    trace: Trace
    mapping: dict[str, str]  # trace function -> benchmark function
    origin_s: float
    scale: float
    duration_s: float
    memory_mb: int
    size: str
    daemon_args: list[str]
    drain_timeout_s: float
    tail_s: float
    extra: dict = field(default_factory=dict)

    def used_specs(self) -> list[FunctionSpec]:
        """The benchmark functions some trace function is mapped to."""
        used = set(self.mapping.values())
        return [s for s in self.specs if s.name in used]

    def schedule(self) -> schedule_mod.Schedule:
        timeline = schedule_mod.Timeline(origin_s=self.origin_s, scale=self.scale, duration_s=self.duration_s)
        return schedule_mod.build(self.trace.invocations, self.mapping, timeline)

    def scenario_args(self, mode: str, vm_memory: int | None) -> list[str]:
        args = [*self.daemon_args, "--vm-shared-mode", mode]
        return args + (["--vm-memory", f"{vm_memory // MIB}MiB"] if vm_memory else [])


async def poll_plugged(client: IceboxClient, writer, period_s: float = 1.0) -> None:
    """The daemon's plugged-partition gauge, if it exports one, every period."""
    while True:
        try:
            reply = await client.request("GET", "/metrics", timeout_s=5.0)
            if reply.status == 200 and isinstance(reply.body, str):
                samples = parse_metrics(reply.body)
                plugged = [v for name, _, v in samples if name.endswith("partition_plugged_bytes")]
                releasing = [v for name, _, v in samples if name.endswith("partition_releasing_bytes")]
                if plugged:
                    writer.write(
                        {
                            "t_ms": round(time.time() * 1000.0, 3),
                            "plugged_bytes": sum(plugged),
                            "releasing_bytes": sum(releasing),
                        }
                    )
        except IceboxError:
            pass
        await asyncio.sleep(period_s)


async def warm_up(client: IceboxClient, plan: Plan, writer, log) -> None:
    """One invocation per function, all at once: every action's VM boots before the replay."""
    used = plan.used_specs()
    results = await asyncio.gather(
        *[invoke_once(client, s.name, s.input(plan.size), action_timeout_ms=s.timeout_ms) for s in used]
    )
    for spec, fields in zip(used, results, strict=True):
        writer.write({"function": spec.name, "warmup": True, **fields})
        log(f"warm-up {spec.name}: {fields['status']} in {(fields.get('latency_ms') or 0) / 1000:.1f} s")


async def run_scenario(
    plan: Plan, mode: str, scenario: str, vm_memory: int | None, out: Path, *, command: str, log=print
) -> Path:
    """One replay with its own daemon; returns its run directory."""
    label = f"{mode}-{scenario}"
    run_dir = RunDir(out)
    sched = plan.schedule()
    args = plan.scenario_args(mode, vm_memory)
    log(f"[{label}] starting iceboxd {' '.join(args)}; {len(sched.items)} invocations over {sched.length_s():.0f} s")
    used = plan.used_specs()
    # A VM probe (--vm-accel auto) can hold the daemon's start past the default 30 s under load.
    with Daemon(args, log_path=run_dir.file("iceboxd.log"), start_timeout_s=120.0) as daemon:
        async with IceboxClient(daemon.apihost, daemon.auth) as client:
            for spec in used:
                await put_body(client, spec.name, vm_shared_body(spec, plan.memory_mb), spec.name)
            config = {
                "command": command,
                "kind": "recipe-run",
                "recipe": "squeezy-fig10",
                "label": label,
                "mode": mode,
                "scenario": scenario,
                "vm_memory_bytes": vm_memory,
                "daemon_args": args,
                "mapping": plan.mapping,
                "origin_s": plan.origin_s,
                "scale": plan.scale,
                "duration_s": plan.duration_s,
                "memory_mb": plan.memory_mb,
                "input": plan.size,
                "scheduled": len(sched.items),
                "dropped": sched.dropped,
                **plan.extra,
            }
            async with RunSession(client, run_dir, config, log=lambda m: log(f"[{label}] {m}")) as session:
                poller = asyncio.create_task(poll_plugged(client, run_dir.jsonl("plugged.jsonl")))
                try:
                    await warm_up(client, plan, run_dir.jsonl("warmup.jsonl"), lambda m: log(f"[{label}] {m}"))
                    driver = OpenLoop(
                        client,
                        sched,
                        session.invocations,
                        params={s.name: s.input(plan.size) for s in used},
                        action_timeouts_ms={s.name: s.timeout_ms for s in used if s.timeout_ms},
                        drain_timeout_s=plan.drain_timeout_s,
                        log=log,
                    )
                    result = await driver.run()
                    session.result.update(result.to_json())
                    # Let keep-alive run out so the last scale-down's reclaims are recorded too.
                    await asyncio.sleep(plan.tail_s)
                finally:
                    poller.cancel()
                    await asyncio.gather(poller, return_exceptions=True)
    return run_dir.path


def load_run(path: Path, mode: str, scenario: str, partition_bytes: int) -> dict:
    """A finished run directory as fig10.run_entry reads it."""

    def _json(name: str) -> dict:
        p = path / name
        return json.loads(p.read_text()) if p.exists() else {}

    result, config = _json("result.json"), _json("config.json")
    return {
        "mode": mode,
        "scenario": scenario,
        "vm_memory_bytes": config.get("vm_memory_bytes"),
        "start_ms": result.get("start_epoch_ms"),
        "end_ms": result.get("end_epoch_ms"),
        "invocations": read_jsonl(path / "invocations.jsonl"),
        "events": read_jsonl(path / "events.jsonl"),
        "plugged": [(r["t_ms"], r["plugged_bytes"]) for r in read_jsonl(path / "plugged.jsonl")],
        "memory": read_jsonl(path / "memory.jsonl"),
        "partition_bytes": partition_bytes,
        "error": result.get("error") or result.get("aborted"),
    }
