"""The leak rules the launcher checks after every daemon (same as tests/integration/src/leaks.rs)."""

from __future__ import annotations

import subprocess
import sys

from icebox_bench import leaks


def test_state_tag_is_the_low_half_of_fnv1a_64(monkeypatch):
    # FNV-1a 64 test vectors: "" -> cbf29ce484222325, "a" -> af63dc4c8601ec8c.
    monkeypatch.setattr(leaks.os.path, "realpath", lambda p: p)
    assert leaks.state_tag("") == "84222325"
    assert leaks.state_tag("a") == "8601ec8c"


def test_state_tag_hashes_the_canonical_path_as_the_daemon_does(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert leaks.state_tag(str(link / "state")) == leaks.state_tag(str(tmp_path / "state"))


def test_path_mentions_respect_component_boundaries():
    assert leaks.mentions_path(b"iceboxd\0--state-dir\0/tmp/x/state\0", b"/tmp/x/state")
    assert leaks.mentions_path(b"--root\0/tmp/x/state/crun", b"/tmp/x/state")
    assert leaks.mentions_path(b"A=1\0DIR=/tmp/x/state", b"/tmp/x/state")
    assert leaks.mentions_path(b"/tmp/x/state2\0/tmp/x/state", b"/tmp/x/state")
    assert not leaks.mentions_path(b"/tmp/x/state2\0", b"/tmp/x/state")
    assert not leaks.mentions_path(b"", b"/tmp/x/state")


def test_cgroup_lines_match_the_daemon_subtree_only():
    assert leaks.names_cgroup("4:memory:/icebox-ab12/hello-1", "/icebox-ab12")
    assert leaks.names_cgroup("0::/icebox-ab12", "/icebox-ab12")
    assert not leaks.names_cgroup("4:memory:/icebox-ab123/hello-1", "/icebox-ab12")
    assert not leaks.names_cgroup("4:memory:/", "/icebox-ab12")


def test_cgroup_dirs_in_v2_and_v1_layouts(tmp_path):
    (tmp_path / "icebox-ab12").mkdir()
    (tmp_path / "memory" / "icebox-ab12").mkdir(parents=True)
    (tmp_path / "pids" / "icebox-ab123").mkdir(parents=True)
    assert leaks.cgroup_dirs("ab12", tmp_path) == [
        str(tmp_path / "icebox-ab12"),
        str(tmp_path / "memory" / "icebox-ab12"),
    ]


def test_a_process_naming_the_state_dir_is_found_and_nothing_else(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(state)])
    try:
        found = leaks.processes_of(str(state), "00000000")
        assert [(p.pid, p.tie) for p in found] == [(proc.pid, "command line names the state dir")]
        assert not leaks.processes_of(str(tmp_path / "other"), "00000000")
    finally:
        proc.kill()
        proc.wait()
    assert not leaks.leftovers(str(state), "00000000")
