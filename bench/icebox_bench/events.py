"""Follow the lifecycle event stream (GET /icebox/v1/events, server-sent events).

The follower first reads the retained events once (follow=false) only to learn the newest
`seq`, then follows from that cursor: every event of the run is captured even if the stream
connects after the first invocation, and none from before the run is recorded. A dropped
stream or a "lagged" notice is resumed from the last seq seen.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import aiohttp

from .client import IceboxClient
from .recorder import JsonlWriter


class SseParser:
    """Incremental text/event-stream parser: feed lines, get complete messages."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.event = "message"
        self.data: list[str] = []
        self.id: str | None = None

    def feed(self, line: str) -> dict | None:
        """One line without its newline; returns {event, id, data} at a message's end."""
        if line == "":
            if not self.data:
                self._reset()
                return None
            message = {"event": self.event, "id": self.id, "data": "\n".join(self.data)}
            self._reset()
            return message
        if line.startswith(":"):
            return None  # comment / keep-alive
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self.data.append(value)
        elif field == "event":
            self.event = value
        elif field == "id":
            self.id = value
        return None


class EventFollower:
    def __init__(self, client: IceboxClient, writer: JsonlWriter | None = None, *, log=print):
        self.client = client
        self.writer = writer
        self.log = log
        self.last_seq = 0
        self.count = 0
        self.gaps = 0
        self._by_instance: dict[str, list[dict]] = defaultdict(list)
        self._changed = asyncio.Condition()
        self._task: asyncio.Task | None = None
        self._connected = asyncio.Event()

    # ---- reading ------------------------------------------------------------------------

    async def _stream(self, since: int, follow: bool):
        """Yield (event name, data dict) from one connection."""
        assert self.client.session is not None
        params = {"since": str(since), "follow": "true" if follow else "false"}
        timeout = aiohttp.ClientTimeout(total=None if follow else 60, connect=10, sock_read=None)
        async with self.client.session.get("/icebox/v1/events", params=params, timeout=timeout) as resp:
            if resp.status != 200:
                raise RuntimeError(f"GET /icebox/v1/events answered {resp.status}: {(await resp.text())[:200]}")
            self._connected.set()
            parser = SseParser()
            async for raw in resp.content:
                message = parser.feed(raw.decode("utf-8", "replace").rstrip("\r\n"))
                if message is None:
                    continue
                if message["event"] == "lagged":
                    yield "lagged", None
                    return
                try:
                    yield message["event"], json.loads(message["data"])
                except json.JSONDecodeError:
                    continue

    async def newest_seq(self) -> int:
        newest = 0
        async for _, event in self._stream(0, follow=False):
            if event:
                newest = max(newest, int(event.get("seq", 0)))
        return newest

    async def _accept(self, event: dict) -> None:
        seq = int(event.get("seq", 0))
        if seq <= self.last_seq:
            return  # a replay overlap after a reconnect
        if self.last_seq and seq != self.last_seq + 1:
            self.gaps += 1
        self.last_seq = seq
        self.count += 1
        if self.writer is not None:
            self.writer.write(event)
        async with self._changed:
            self._by_instance[event.get("instance", "")].append(event)
            self._changed.notify_all()

    async def _follow(self) -> None:
        failures = 0
        while True:
            try:
                async for name, event in self._stream(self.last_seq, follow=True):
                    failures = 0
                    if name == "lagged":
                        self.log("warning: the event stream fell behind; resuming from the last event seen")
                        break
                    await self._accept(event)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any stream failure: report and resume
                failures += 1
                if failures == 1 or failures % 30 == 0:
                    self.log(f"warning: event stream interrupted ({e.__class__.__name__}: {e}); reconnecting")
            await asyncio.sleep(0.2 if failures < 5 else 1.0)

    async def start(self) -> None:
        self.last_seq = await self.newest_seq()
        self._task = asyncio.create_task(self._follow(), name="event-follower")
        # Wait until the stream is open so events from the first invocation arrive promptly
        # (they would be replayed from the cursor anyway).
        try:
            await asyncio.wait_for(self._connected.wait(), timeout=10)
        except TimeoutError:
            self.log("warning: the event stream did not open within 10 s; continuing")

    async def stop(self, grace_s: float = 0.5) -> None:
        """Let in-flight events arrive, then close the stream."""
        await asyncio.sleep(grace_s)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    # ---- queries ------------------------------------------------------------------------

    def events_of(self, instance: str) -> list[dict]:
        return list(self._by_instance.get(instance, []))

    def find(self, instance: str, kind: str) -> dict | None:
        for event in self._by_instance.get(instance, []):
            if event.get("kind") == kind:
                return event
        return None

    async def wait_for(self, instance: str, kind: str, timeout_s: float = 10.0) -> dict:
        async def _wait() -> dict:
            async with self._changed:
                while (found := self.find(instance, kind)) is None:
                    await self._changed.wait()
                return found

        try:
            return await asyncio.wait_for(_wait(), timeout_s)
        except TimeoutError:
            raise TimeoutError(f"no {kind} event for instance {instance} within {timeout_s:.0f} s") from None
