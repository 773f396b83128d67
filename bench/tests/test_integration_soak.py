"""`icebox-bench soak` against a real iceboxd, briefly: it reports, and it cleans up also when
interrupted in the middle of the load."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from icebox_bench import leaks, paths

pytestmark = pytest.mark.integration


def _soak(out, *flags) -> subprocess.Popen:
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    log = open(out.parent / "soak.log", "wb")
    # SIGINT as at a terminal: a test run started as a background job (make test &) hands its
    # children SIGINT ignored, and Python then never turns it into KeyboardInterrupt.
    return subprocess.Popen(
        [sys.executable, "-m", "icebox_bench", "soak", "--out", str(out), *flags],
        stdout=subprocess.DEVNULL,
        stderr=log,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _daemon_pid(log_text: str) -> int:
    return int(log_text.split("iceboxd pid ", 1)[1].split()[0])


def _assert_nothing_left(result: dict, daemon_pid: int) -> None:
    after = result["after_stop"]
    assert after["leaked_pids"] == [] and after["leftover_processes"] == [] and after["cgroup_dirs_left"] == []
    assert not leaks.cgroup_dirs(after["cgroup_tag"])
    assert not os.path.exists(f"/proc/{daemon_pid}")


def test_a_short_soak_reports_and_leaves_nothing(tmp_path):
    out = tmp_path / "soak"
    proc = _soak(out, "--clients", "4", "--duration", "4", "--kill-interval", "0.5")
    assert proc.wait(timeout=180) == 0, (tmp_path / "soak.log").read_text()
    result = json.loads((out / "soak.json").read_text())
    assert result["requests"] > 0 and result["by_category"]["ok"] > 0
    assert result["by_category"]["daemon failure"] == 0, result["by_kind"]
    assert result["kills"]["total"] > 0
    assert result["daemon_rss_bytes"]["peak"] >= result["daemon_rss_bytes"]["before"] > 0
    assert "| Verdict | passed |" in (out / "soak.md").read_text()
    _assert_nothing_left(result, _daemon_pid((tmp_path / "soak.log").read_text()))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_the_middle_of_the_load_stops_the_daemon_and_cleans_up(tmp_path, sig):
    out = tmp_path / "soak"
    proc = _soak(out, "--clients", "8", "--duration", "120", "--kill-interval", "0.3")
    log = tmp_path / "soak.log"
    deadline = time.monotonic() + 120
    while "load:" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    time.sleep(2)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 130, log.read_text()
    result = json.loads((out / "soak.json").read_text())
    assert result["interrupted"] and result["requests"] > 0
    _assert_nothing_left(result, _daemon_pid(log.read_text()))
