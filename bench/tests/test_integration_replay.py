"""Replay two minutes of the 2019 sample against a real iceboxd and account for every
scheduled invocation: one record each in invocations.jsonl, and each activation id the
harness recorded is an activation the daemon has."""

from __future__ import annotations

import asyncio
import json

import pytest
from icebox_bench import cli, paths
from icebox_bench.client import IceboxClient
from icebox_bench.daemon import Daemon
from icebox_bench.invoke import RECORD_STATUSES
from icebox_bench.recorder import read_jsonl

pytestmark = pytest.mark.integration


@pytest.fixture
def daemon(tmp_path):
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    # A deep queue: the even expansion sends bursts (every function invoked once a minute fires
    # at second 30 of it), and at this scale they exceed the default queue of 256; rejected
    # invocations would be accounted for too, but the test also wants every function to run.
    with Daemon(["--queue-size", "4096"], log_path=tmp_path / "iceboxd.log") as d:
        yield d


async def _daemon_activation_ids(apihost: str, auth: str) -> set[str]:
    ids: set[str] = set()
    async with IceboxClient(apihost, auth) as client:
        skip = 0
        while True:
            page = await client.list_activations(limit=200, skip=skip)
            ids.update(a["activationId"] for a in page)
            if len(page) < 200:
                return ids
            skip += 200


def test_replay_accounts_for_every_scheduled_invocation(daemon, functions_dir, traces_dir, tmp_path):
    out = tmp_path / "run"
    code = cli.main(
        [
            "replay",
            "--trace",
            str(traces_dir / "azure2019-sample100"),
            "--window",
            "480m:482m",
            "--scale",
            "20",
            "--mapping",
            "round-robin",
            "--seed",
            "1",
            "--functions",
            "all",
            "--functions-dir",
            str(functions_dir),
            "--apihost",
            daemon.apihost,
            "--auth",
            daemon.auth,
            "--out",
            str(out),
            "--drain-timeout",
            "60",
        ]
    )
    assert code == 0, (out / "result.json").read_text() if (out / "result.json").exists() else daemon.log_tail()

    config = json.loads((out / "config.json").read_text())
    result = json.loads((out / "result.json").read_text())
    records = read_jsonl(out / "invocations.jsonl")
    scheduled = config["scheduled"]
    assert scheduled == 1348  # every invocation of the window: round-robin maps all functions
    assert result["scheduled"] == scheduled and result["complete"] and not result["aborted"]

    # Exactly one record per scheduled invocation, each one an activation that succeeded.
    assert sorted(r["seq"] for r in records) == list(range(scheduled))
    assert {r["status"] for r in records} == {"success"}
    answered = [r for r in records if r["status"] in RECORD_STATUSES]
    ids = [r["activation_id"] for r in answered]
    assert len(set(ids)) == len(ids)
    assert all(r["start_kind"] in ("cold", "warm") and r["instance"] for r in answered)

    # The daemon ran exactly the activations the harness recorded.
    assert set(ids) == asyncio.run(_daemon_activation_ids(daemon.apihost, daemon.auth))

    # All three functions ran; the memory timeline and the lifecycle events were recorded.
    assert {r["function"] for r in records} == {"t-hello-py", "t-square-py", "t-hello-js"}
    assert read_jsonl(out / "memory.jsonl") and any(s["instances"] for s in read_jsonl(out / "memory.jsonl"))
    kinds = {e["kind"] for e in read_jsonl(out / "events.jsonl")}
    assert {"created", "runtime_ready", "init_done", "run_start", "run_end"} <= kinds
