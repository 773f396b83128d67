"""The open-loop driver: send every scheduled invocation at its time, never waiting for answers.

The scheduler sleeps until the next send time and hands the invocation to its own task, so a
slow or stuck answer never delays later sends. Its own delay, the *schedule lag* (actual send
time minus scheduled time, measured just before the request is written), is recorded per
invocation and summarised: a lag that grows means the client, not the daemon, is the
bottleneck and the results do not show the intended load.

Every scheduled invocation ends as exactly one invocations.jsonl line: its answer's status, or
`not_sent` (the run was aborted before its time) or `abandoned` (sent, but no answer by the
end of the drain period).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter
from dataclasses import dataclass, field

from .client import IceboxClient, IceboxError
from .invoke import invoke_once
from .recorder import JsonlWriter
from .schedule import Schedule, Scheduled
from .stats import percentiles

NOT_SENT = "not_sent"
ABANDONED = "abandoned"
# Consecutive connection failures after which the daemon's health is checked and, if it is
# gone, the run is aborted instead of failing the rest of the schedule one by one.
_CONNECTION_FAILURES_BEFORE_CHECK = 20


@dataclass
class OpenLoopResult:
    scheduled: int = 0
    sent: int = 0
    statuses: Counter = field(default_factory=Counter)
    lag_ms: dict = field(default_factory=dict)
    start_epoch_ms: float = 0.0
    end_epoch_ms: float = 0.0
    aborted: str | None = None

    def to_json(self) -> dict:
        return {
            "scheduled": self.scheduled,
            "sent": self.sent,
            "statuses": dict(self.statuses),
            "lag_ms": self.lag_ms,
            "start_epoch_ms": self.start_epoch_ms,
            "end_epoch_ms": self.end_epoch_ms,
            "aborted": self.aborted,
        }


class OpenLoop:
    def __init__(
        self,
        client: IceboxClient,
        schedule: Schedule,
        writer: JsonlWriter,
        *,
        params: dict[str, dict] | None = None,
        action_names: dict[str, str] | None = None,
        action_timeouts_ms: dict[str, int] | None = None,
        drain_timeout_s: float = 120.0,
        start_delay_s: float = 0.2,
        log=print,
    ):
        self.client = client
        self.schedule = schedule
        self.writer = writer
        self.params = params or {}
        self.action_names = action_names or {}
        self.timeouts = action_timeouts_ms or {}
        self.drain_timeout_s = drain_timeout_s
        self.start_delay_s = start_delay_s
        self.log = log
        self.result = OpenLoopResult(scheduled=len(schedule.items))
        self._lags: list[float] = []
        self._inflight: dict[asyncio.Task, Scheduled] = {}
        self._written: set[int] = set()
        self._connection_failures = 0
        self._abort: str | None = None
        self._wall0 = 0.0

    def _write(self, item: Scheduled, fields: dict) -> None:
        record = {
            "seq": item.seq,
            "function": item.function,
            "trace_function": item.trace_function,
            "warmup": item.warmup,
            "offset_s": round(item.offset_s, 6),
            "scheduled_ms": round((self._wall0 + item.offset_s) * 1000.0, 3),
            **fields,
        }
        self.result.statuses[record["status"]] += 1
        self._written.add(item.seq)
        self.writer.write(record)

    async def _fire(self, item: Scheduled, target: float) -> None:
        loop = asyncio.get_running_loop()
        lag_ms = (loop.time() - target) * 1000.0
        self._lags.append(lag_ms)
        self.result.sent += 1
        try:
            fields = await invoke_once(
                self.client,
                self.action_names.get(item.function, item.function),
                self.params.get(item.function, {}),
                action_timeout_ms=self.timeouts.get(item.function),
            )
        except asyncio.CancelledError:
            self._write(
                item, {"status": ABANDONED, "lag_ms": round(lag_ms, 3), "error": "no answer before the run ended"}
            )
            raise
        self._write(item, {**fields, "lag_ms": round(lag_ms, 3)})
        if fields["status"] == "connection_error":
            self._connection_failures += 1
            if self._connection_failures % _CONNECTION_FAILURES_BEFORE_CHECK == 0:
                await self._check_daemon()
        else:
            self._connection_failures = 0

    async def _check_daemon(self) -> None:
        try:
            await self.client.health()
        except IceboxError as e:
            self._abort = f"iceboxd stopped answering ({e})"

    def _spawn(self, item: Scheduled, target: float) -> None:
        task = asyncio.create_task(self._fire(item, target))
        self._inflight[task] = item
        task.add_done_callback(lambda t: self._inflight.pop(t, None))

    async def _drain(self, timeout_s: float) -> None:
        if not self._inflight:
            return
        items = dict(self._inflight)
        done, pending = await asyncio.wait(set(items), timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            self.log(f"warning: {len(pending)} invocations had no answer {timeout_s:.0f} s after the last send")
        # A task cancelled before its first step never ran _fire: account for it here.
        for task in pending:
            if items[task].seq not in self._written:
                self._write(items[task], {"status": NOT_SENT, "error": "cancelled before it was sent"})

    async def run(self) -> OpenLoopResult:
        loop = asyncio.get_running_loop()
        # Objects created so far (the schedule) never become garbage: move them out of the
        # collector's way so a full collection cannot pause the scheduler for long.
        gc.collect()
        gc.freeze()
        t0 = loop.time() + self.start_delay_s
        self._wall0 = time.time() + self.start_delay_s
        self.result.start_epoch_ms = round(self._wall0 * 1000.0, 3)
        items = self.schedule.items
        index = 0
        try:
            while index < len(items):
                if self._abort:
                    break
                item = items[index]
                target = t0 + item.offset_s
                delay = target - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                self._spawn(item, target)
                index += 1
        except asyncio.CancelledError:
            self._abort = "interrupted"
            raise
        finally:
            for item in items[index:]:
                self._write(item, {"status": NOT_SENT, "error": self._abort or "interrupted"})
            if self._abort:
                self.result.aborted = self._abort
                self.log(f"error: run aborted: {self._abort}")
            try:
                # Interrupted: do not make the user wait for answers; record them as abandoned.
                await self._drain(0.0 if self._abort == "interrupted" else self.drain_timeout_s)
            finally:
                self.result.end_epoch_ms = round(time.time() * 1000.0, 3)
                self.result.lag_ms = {
                    **percentiles(self._lags, (50, 90, 99)),
                    "max": max(self._lags) if self._lags else None,
                    "samples": len(self._lags),
                }
                gc.unfreeze()
        return self.result
