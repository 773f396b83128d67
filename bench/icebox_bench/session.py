"""The recording around any run: config.json first, the memory sampler and the event follower
while it runs, result.json at the end, whatever way it ends."""

from __future__ import annotations

import asyncio
import datetime
import sys
import time

from . import __version__
from .client import IceboxClient
from .events import EventFollower
from .recorder import RunDir
from .sampler import MemorySampler


class RunSession:
    def __init__(self, client: IceboxClient, run_dir: RunDir, config: dict, *, sample_period_s: float = 1.0, log=print):
        self.client = client
        self.run_dir = run_dir
        self.config = config
        self.log = log
        self.result: dict = {}
        self.invocations = run_dir.jsonl("invocations.jsonl")
        self.sampler = MemorySampler(client, run_dir.jsonl("memory.jsonl"), sample_period_s, log=log)
        self.events = EventFollower(client, run_dir.jsonl("events.jsonl"), log=log)

    async def __aenter__(self) -> RunSession:
        health = await self.client.health()  # fails clearly if the daemon is unreachable
        self.config = {
            **self.config,
            "icebox_bench_version": __version__,
            "python": sys.version.split()[0],
            "apihost": self.client.apihost,
            "daemon": health,
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "started_epoch_ms": round(time.time() * 1000.0, 3),
        }
        self.run_dir.write_json("config.json", self.config)
        await self.events.start()
        self.sampler.start()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        try:
            await self.sampler.stop(final_sample=exc_type is None)
            await self.events.stop(grace_s=0.5 if exc_type is None else 0.0)
        finally:
            self.result.setdefault("complete", exc_type is None and not self.result.get("aborted"))
            if exc_type is asyncio.CancelledError or exc_type is KeyboardInterrupt:
                self.result["error"] = "interrupted"
            elif exc is not None:
                self.result["error"] = f"{exc_type.__name__}: {exc}"
            self.result["ended_epoch_ms"] = round(time.time() * 1000.0, 3)
            self.result["memory_samples"] = self.sampler.samples
            self.result["memory_sample_errors"] = self.sampler.errors
            self.result["events"] = self.events.count
            self.result["event_gaps"] = self.events.gaps
            self.run_dir.write_json("result.json", self.result)
            self.run_dir.close()
