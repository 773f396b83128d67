"""n activations in flight, closed loop: n workers, each invoking again as soon as its last
invocation answered (the thesis drove its proxies with `ab -c n`). While they run, the
action's memory can be sampled (memory per concurrency level) and latencies recorded."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ..client import IceboxClient
from ..invoke import invoke_once
from ..recorder import JsonlWriter
from .actions import measure_action


@dataclass
class LoopResult:
    n: int
    records: list[dict] = field(default_factory=list)  # every invocation, warm-up included
    samples: list[dict] = field(default_factory=list)  # measure_action() while all n ran
    measured_from_ms: float = 0.0  # client clock: the end of the warm-up

    def measured(self) -> list[dict]:
        """Invocations that started after the warm-up."""
        return [r for r in self.records if r["start_ms"] >= self.measured_from_ms]

    def failures(self) -> list[dict]:
        return [r for r in self.records if r["status"] != "success"]


async def run_closed_loop(
    client: IceboxClient,
    action: str,
    params: dict,
    n: int,
    *,
    warmup_s: float,
    measure_s: float,
    sample_period_s: float | None = None,
    invocations: JsonlWriter | None = None,
    tags: dict | None = None,
    timeout_ms: int | None = None,
) -> LoopResult:
    """Warm-up: until every worker has had one answer (so every instance or isolate the level
    needs exists) and `warmup_s` more; then `measure_s` measured, sampling memory every
    `sample_period_s` (None: no sampling)."""
    result = LoopResult(n)
    stop = asyncio.Event()
    answered = [asyncio.Event() for _ in range(n)]

    async def worker(i: int) -> None:
        while not stop.is_set():
            fields = await invoke_once(client, action, params, action_timeout_ms=timeout_ms)
            fields["worker"] = i
            result.records.append(fields)
            if invocations is not None:
                invocations.write({"action": action, **(tags or {}), "concurrency": n, **fields})
            answered[i].set()

    tasks = [asyncio.create_task(worker(i)) for i in range(n)]
    try:
        await asyncio.gather(*(e.wait() for e in answered))
        await asyncio.sleep(warmup_s)
        result.measured_from_ms = time.time() * 1000.0
        end = time.monotonic() + measure_s
        while time.monotonic() < end:
            if sample_period_s is None:
                await asyncio.sleep(max(0.0, end - time.monotonic()))
                break
            t0 = time.monotonic()
            result.samples.append(await measure_action(client, action))
            await asyncio.sleep(max(0.0, sample_period_s - (time.monotonic() - t0)))
    finally:
        stop.set()
        # Workers finish their invocation in flight: a level ends with nothing running.
        await asyncio.gather(*tasks, return_exceptions=True)
    return result
