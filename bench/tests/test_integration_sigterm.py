"""SIGTERM to an experiment in the middle of a replay (a CI time-out, `kill`): the harness
exits like on Ctrl-C, and nothing it started is left behind — no iceboxd, no instance, no
cpuacct cgroup of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from icebox_bench import paths
from icebox_bench.desiccant_eval.cpu import cpuacct_mount

pytestmark = pytest.mark.integration


def _iceboxd_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(b"/iceboxd"):
                pids.add(int(entry.name))
    return pids


def _wait_for(what: str, condition, timeout_s: float, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"the experiment exited ({proc.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


def test_sigterm_mid_replay_stops_its_daemons_and_removes_its_cgroup(functions_dir, traces_dir, tmp_path):
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    mount = cpuacct_mount()
    if mount is None or not os.access(mount, os.W_OK):
        pytest.skip("no writable cgroup v1 cpuacct hierarchy: the experiment does not make a cgroup here")
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"t-hello-py": 5.0, "t-square-py": 5.0}))
    out, log = tmp_path / "run", tmp_path / "harness.log"
    before = _iceboxd_pids()
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "icebox_bench",
                "run",
                "desiccant-fig9-10",
                "--out",
                str(out),
                "--functions-dir",
                str(functions_dir),
                "--functions",
                "python",
                "--trace",
                str(traces_dir / "azure2019-sample100"),
                "--function-durations",
                str(durations),
                "--scales",
                "20",
                "--modes",
                "vanilla",
                "--warmup",
                "0s",
                "--duration",
                "300s",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        invocations = out / "runs" / "vanilla-x20" / "invocations.jsonl"
        _wait_for(
            "the replay's first invocations",
            lambda: invocations.exists() and invocations.stat().st_size > 0,
            120,
            proc,
            log,
        )
        groups = lambda: sorted(p.name for p in mount.glob(f"bench-cpuacct-{proc.pid}-*"))  # noqa: E731
        assert groups(), "the replay daemon runs in a cpuacct cgroup of the harness's own"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert "interrupted" in text, text[-3000:]
    assert groups() == [], f"cgroups left behind: {groups()}"
    left = _iceboxd_pids() - before
    assert not left, f"iceboxd processes left behind: {left}"
    # What was recorded before the signal is kept.
    assert invocations.stat().st_size > 0
