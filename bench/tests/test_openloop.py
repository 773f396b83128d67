"""The open-loop driver against in-process fake daemons (behaviour, never timing)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from icebox_bench.client import DaemonUnreachable, IceboxClient
from icebox_bench.daemon import free_port
from icebox_bench.openloop import OpenLoop
from icebox_bench.recorder import RunDir, read_jsonl
from icebox_bench.schedule import uniform
from icebox_bench.session import RunSession

AUTH = "u:k"


def _record(name: str, code: int) -> dict:
    return {
        "activationId": f"{name}-id",
        "statusCode": code,
        "start": 1,
        "end": 2,
        "duration": 1,
        "response": {
            "status": "x",
            "statusCode": code,
            "success": code == 0,
            "result": {"error": "boom"} if code else {},
        },
        "annotations": [{"key": "icebox.start", "value": "warm"}, {"key": "icebox.instance", "value": "i-1"}],
    }


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    # Handlers that never answer must not hold the test's clean-up for the default 60 s.
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


def test_sends_never_wait_for_answers(tmp_path):
    """The fake answers nothing until every scheduled request has arrived: a driver that waited
    for an answer before its next send would never finish."""
    n = 25

    async def scenario():
        arrived = 0
        all_in = asyncio.Event()

        async def invoke(request):
            nonlocal arrived
            arrived += 1
            if arrived == n:
                all_in.set()
            await all_in.wait()
            return web.json_response(_record(request.match_info["name"], 0))

        app = web.Application()
        app.router.add_post("/api/v1/namespaces/_/actions/{name}", invoke)
        runner, url = await _serve(app)
        try:
            async with IceboxClient(url, AUTH) as client:
                run = RunDir(tmp_path / "run")
                driver = OpenLoop(
                    client, uniform(500.0, n / 500.0, ["f"]), run.jsonl("invocations.jsonl"), log=lambda m: None
                )
                result = await asyncio.wait_for(driver.run(), timeout=30)
                run.close()
        finally:
            await runner.cleanup()
        return result

    result = asyncio.run(scenario())
    assert result.statuses == {"success": n} and result.sent == n
    records = read_jsonl(tmp_path / "run" / "invocations.jsonl")
    assert sorted(r["seq"] for r in records) == list(range(n))


def test_outcomes_are_classified(tmp_path):
    async def invoke(request):
        name = request.match_info["name"]
        if name == "ok":
            return web.json_response(_record(name, 0))
        if name == "apperr":
            return web.json_response(_record(name, 1), status=502)
        if name == "busy":
            return web.json_response({"error": "queue full", "code": "x"}, status=429, headers={"Retry-After": "1"})
        return web.json_response({"error": "The requested resource does not exist.", "code": "x"}, status=404)

    async def scenario():
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/_/actions/{name}", invoke)
        runner, url = await _serve(app)
        try:
            async with IceboxClient(url, AUTH) as client:
                run = RunDir(tmp_path / "run")
                sched = uniform(100.0, 0.04, ["ok", "apperr", "busy", "missing"])
                await OpenLoop(client, sched, run.jsonl("invocations.jsonl"), log=lambda m: None).run()
                run.close()
        finally:
            await runner.cleanup()

    asyncio.run(scenario())
    by_function = {r["function"]: r for r in read_jsonl(tmp_path / "run" / "invocations.jsonl")}
    assert by_function["ok"]["status"] == "success" and by_function["ok"]["instance"] == "i-1"
    assert by_function["ok"]["start_kind"] == "warm" and by_function["ok"]["activation_id"] == "ok-id"
    assert by_function["apperr"]["status"] == "application_error" and by_function["apperr"]["error"] == "boom"
    assert by_function["busy"]["status"] == "rejected"
    assert by_function["missing"]["status"] == "http_error" and "does not exist" in by_function["missing"]["error"]


def test_unreachable_daemon_aborts_and_accounts_for_everything(tmp_path):
    port = free_port()  # nothing listens there

    async def scenario():
        async with IceboxClient(f"http://127.0.0.1:{port}", AUTH) as client:
            run = RunDir(tmp_path / "run")
            result = await OpenLoop(
                client, uniform(100.0, 2.0, ["f"]), run.jsonl("invocations.jsonl"), log=lambda m: None
            ).run()
            run.close()
            return result

    result = asyncio.run(scenario())
    assert result.aborted and "stopped answering" in result.aborted
    assert sum(result.statuses.values()) == 200
    assert set(result.statuses) <= {"connection_error", "not_sent"}
    assert len(read_jsonl(tmp_path / "run" / "invocations.jsonl")) == 200


def test_session_reports_an_unreachable_daemon_clearly(tmp_path):
    port = free_port()

    async def scenario():
        async with IceboxClient(f"http://127.0.0.1:{port}", AUTH) as client:
            async with RunSession(client, RunDir(tmp_path / "run"), {}, log=lambda m: None):
                pass

    with pytest.raises(DaemonUnreachable, match="cannot reach iceboxd"):
        asyncio.run(scenario())


def test_interrupted_run_accounts_for_every_scheduled_invocation(tmp_path):
    """Cancel the driver (Ctrl-C) while answers are outstanding: sent ones become `abandoned`,
    the rest `not_sent`, and nothing is missing."""
    n = 200

    async def scenario():
        five_in = asyncio.Event()
        arrived = 0

        async def invoke(request):
            nonlocal arrived
            arrived += 1
            if arrived == 5:
                five_in.set()
            await asyncio.Event().wait()  # never answers

        app = web.Application()
        app.router.add_post("/api/v1/namespaces/_/actions/{name}", invoke)
        runner, url = await _serve(app)
        try:
            async with IceboxClient(url, AUTH) as client:
                run = RunDir(tmp_path / "run")
                driver = OpenLoop(
                    client, uniform(50.0, n / 50.0, ["f"]), run.jsonl("invocations.jsonl"), log=lambda m: None
                )
                task = asyncio.create_task(driver.run())
                await asyncio.wait_for(five_in.wait(), timeout=30)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                run.close()
                return driver.result
        finally:
            await runner.cleanup()

    result = asyncio.run(scenario())
    records = read_jsonl(tmp_path / "run" / "invocations.jsonl")
    assert sorted(r["seq"] for r in records) == list(range(n))
    assert set(result.statuses) <= {"abandoned", "not_sent"} and result.statuses["abandoned"] >= 5
    assert result.aborted == "interrupted"
