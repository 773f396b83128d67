"""A stand-in for iceboxd's invoke endpoint, for the schedule-lag self-check.

Answers POST /api/v1/namespaces/{ns}/actions/{name} with an activation record after
`--delay-ms` (so answers overlap later sends, as with real functions), and GET
/icebox/v1/health, /icebox/v1/instances, /icebox/v1/memory and an empty /icebox/v1/events, so
the whole recording path runs. Started as its own process: sharing the harness's event loop
would measure the server's work as the client's lag.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time

from aiohttp import web


def _record(name: str, start_ms: int) -> dict:
    end_ms = int(time.time() * 1000)
    return {
        "namespace": "guest",
        "name": name,
        "version": "0.0.1",
        "subject": "guest",
        "activationId": secrets.token_hex(16),
        "start": start_ms,
        "end": end_ms,
        "duration": end_ms - start_ms,
        "statusCode": 0,
        "response": {"status": "success", "statusCode": 0, "success": True, "result": {}},
        "annotations": [
            {"key": "icebox.start", "value": "warm"},
            {"key": "icebox.instance", "value": "i-dummy"},
            {"key": "waitTime", "value": 0},
        ],
        "publish": False,
    }


def make_app(delay_ms: float) -> web.Application:
    async def invoke(request: web.Request) -> web.Response:
        start_ms = int(time.time() * 1000)
        await request.read()
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000.0)
        return web.json_response(_record(request.match_info["name"], start_ms))

    async def health(_: web.Request) -> web.Response:
        return web.json_response(
            {"status": "ok", "version": "dummy", "uptime_s": 0, "isolation": "none", "cgroup": "none", "instances": 0}
        )

    async def empty_list(_: web.Request) -> web.Response:
        return web.json_response([])

    async def memory(_: web.Request) -> web.Response:
        zero = {"uss": 0, "pss": 0, "rss": 0, "swap": 0, "cgroup": 0}
        return web.json_response(
            {"budget": 0, "charge_mode": "uss", "charged": 0, "by_state": {}, "total": zero, "max_instances": 0}
        )

    async def events(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if request.query.get("follow") == "false":
            return resp
        try:
            while True:  # live stream without events; keep-alive comments like the daemon's
                await resp.write(b": keep-alive\n\n")
                await asyncio.sleep(15)
        except ConnectionResetError:
            return resp  # the client closed the stream

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/actions/{name}", invoke)
    app.router.add_get("/icebox/v1/health", health)
    app.router.add_get("/icebox/v1/instances", empty_list)
    app.router.add_get("/icebox/v1/memory", memory)
    app.router.add_get("/icebox/v1/events", events)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    web.run_app(
        make_app(args.delay_ms), host="127.0.0.1", port=args.port, print=None, access_log=None, handle_signals=True
    )


if __name__ == "__main__":
    main()
