"""Timed request loops: each sample is one request's wall time, client side, in seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .client import Client, HttpError


@dataclass
class Target:
    """Something to call repeatedly: one keep-alive client, one request."""

    name: str
    client: Client
    method: str
    path: str
    body: bytes | None
    samples: list[float] = field(default_factory=list)

    def call(self) -> float:
        t0 = time.perf_counter()
        reply = self.client.request(self.method, self.path, self.body)
        elapsed = time.perf_counter() - t0
        if reply.status != 200:
            raise HttpError(self.method, self.path, reply)
        return elapsed


def time_calls(target: Target, n: int, gap: float = 0.0) -> list[float]:
    """n sequential calls, optionally sleeping `gap` seconds before each."""
    out = []
    for _ in range(n):
        if gap:
            time.sleep(gap)
        out.append(target.call())
    return out


def interleaved(targets: list[Target], n: int, block: int) -> None:
    """n calls per target in blocks of `block`, rotating the order every round, so that
    whatever else the machine does in the meantime falls on every target alike. Fills
    `target.samples`."""
    rounds = -(-n // block)
    for r in range(rounds):
        order = targets[r % len(targets) :] + targets[: r % len(targets)]
        for t in order:
            todo = min(block, n - len(t.samples))
            t.samples.extend(time_calls(t, todo))
