"""The FaaSMem runs' second sampler: next to the CPU counters (desiccant_eval.cpu.CpuSampler,
cpu.jsonl), every period it reads the daemon's /metrics (only the offload families) and the
kernel's swap state (/proc/swaps, /proc/vmstat pswpin / pswpout) into offload.jsonl:

    {"t_ms": ..., "metrics": [[name, {labels}, value], ...], "swaps": [...], "vmstat": {...}}

`metrics` is null when /metrics could not be read at that moment.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..client import IceboxClient, IceboxError
from ..desiccant_eval.cpu import CpuSampler, MeteredDaemon
from ..promtext import parse_metrics
from ..recorder import JsonlWriter
from .overheads import parse_proc_swaps, parse_vmstat

METRIC_PREFIXES = ("icebox_offload", "icebox_refaulted")


def offload_metrics(text: str) -> list[list]:
    return [[n, labels, v] for n, labels, v in parse_metrics(text) if n.startswith(METRIC_PREFIXES)]


def read_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


class OffloadSampler(CpuSampler):
    def __init__(
        self, client: IceboxClient, daemon: MeteredDaemon, cpu: JsonlWriter, offload: JsonlWriter, period_s: float = 1.0
    ):
        super().__init__(client, daemon, cpu, period_s)
        self.offload = offload
        self.metrics_errors = 0

    async def sample_once(self) -> dict | None:
        record = await super().sample_once()
        metrics = None
        try:
            reply = await self.client.request("GET", "/metrics")
            if reply.status == 200:
                metrics = offload_metrics(str(reply.body))
        except IceboxError:
            pass
        if metrics is None:
            self.metrics_errors += 1
        self.offload.write(
            {
                "t_ms": round(time.time() * 1000.0, 3),
                "metrics": metrics,
                "swaps": parse_proc_swaps(read_text("/proc/swaps")),
                "vmstat": parse_vmstat(read_text("/proc/vmstat")),
            }
        )
        return record
