"""Memory timeline: sample /icebox/v1/instances and /icebox/v1/memory at a fixed period.

The daemon measures instance memory every --sample-interval (1 s by default) and serves the
last measurement, so sampling faster than that repeats values; each instance's
`measured_at_ms` is kept so a reader can tell.
"""

from __future__ import annotations

import asyncio
import time

from .client import IceboxClient, IceboxError
from .recorder import JsonlWriter

_MEASURES = ("uss", "pss", "rss", "swap", "cgroup")
# /icebox/v1/memory's fields of a daemon that offloads memory (local bytes, the swap pool).
_OFFLOAD_NODE_FIELDS = ("local", "pool")


def sample_record(t_ms: float, instances: list, memory: dict) -> dict:
    """One memory.jsonl line from the two node API answers."""
    rows = []
    for view in instances:
        mem = view.get("memory") or {}
        row = {
            "id": view.get("id"),
            "action": view.get("action"),
            "state": view.get("state"),
            **{m: mem.get(m, 0) for m in _MEASURES},
            "charged": view.get("charged", 0),
            "invocations": view.get("invocations", 0),
            "measured_at_ms": view.get("measured_at_ms"),
        }
        # Memory offloading (FaaSMem): kept as the daemon sent it, only when it sends it.
        if view.get("offload") is not None:
            row["offload"] = view["offload"]
        rows.append(row)
    by_state = {}
    for state, group in (memory.get("by_state") or {}).items():
        mem = group.get("memory") or {}
        by_state[state] = {"instances": group.get("instances", 0), **{m: mem.get(m, 0) for m in _MEASURES}}
    record = {
        "t_ms": round(t_ms, 3),
        "instances": rows,
        "by_state": by_state,
        "total": {m: (memory.get("total") or {}).get(m, 0) for m in _MEASURES},
        "charged": memory.get("charged", 0),
        "budget": memory.get("budget", 0),
    }
    for key in _OFFLOAD_NODE_FIELDS:
        if memory.get(key) is not None:
            record[key] = memory[key]
    return record


class MemorySampler:
    def __init__(self, client: IceboxClient, writer: JsonlWriter, period_s: float = 1.0, *, log=print):
        if period_s <= 0:
            raise ValueError("the sample period must be positive")
        self.client = client
        self.writer = writer
        self.period_s = period_s
        self.log = log
        self.samples = 0
        self.errors = 0
        self._task: asyncio.Task | None = None

    async def sample_once(self) -> dict:
        t_ms = time.time() * 1000.0
        instances, memory = await asyncio.gather(self.client.instances(), self.client.memory())
        record = sample_record(t_ms, instances, memory)
        self.writer.write(record)
        self.samples += 1
        return record

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.sample_once()
            except IceboxError as e:
                self.errors += 1
                if self.errors == 1 or self.errors % 60 == 0:
                    self.log(f"warning: memory sample failed ({self.errors} so far): {e}")
            # Fixed-rate, not fixed-delay: a slow sample does not shift the later ones.
            next_at += self.period_s
            delay = next_at - loop.time()
            if delay < 0:
                next_at = loop.time()
                delay = 0
            await asyncio.sleep(delay)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="memory-sampler")

    async def stop(self, final_sample: bool = True) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if final_sample:
            try:
                await self.sample_once()
            except IceboxError:
                pass
