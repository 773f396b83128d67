"""The shared launcher (icebox_bench/daemon.py, also bench/node's) against a real iceboxd: it
finds the instance processes and cgroups of its daemon, and after stop() nothing is left."""

from __future__ import annotations

import asyncio
import os

import pytest
from icebox_bench import leaks, paths
from icebox_bench.client import IceboxClient
from icebox_bench.daemon import Daemon

pytestmark = pytest.mark.integration

HELLO = "def main(args):\n    return {'greeting': 'hello ' + args.get('name', 'world')}\n"


async def _invoke_once(d: Daemon) -> None:
    async with IceboxClient(d.apihost, d.auth) as c:
        await c.put_action("launcher-hello", {"exec": {"kind": "python:3", "code": HELLO}})
        reply = await c.invoke("launcher-hello", {"name": "x"})
        assert reply.status == 200, reply.body


def test_instances_are_found_while_running_and_gone_after_stop():
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    d = Daemon(["--prewarm", "none"])
    with d:
        asyncio.run(_invoke_once(d))
        idents = d.instance_identities()
        assert idents, d.instances()
        if d.health.get("isolation") == "crun":
            # The tag the launcher computes is the daemon's: its instances sit in icebox-<tag>.
            assert leaks.cgroup_dirs(d.state_tag)
            assert any(leaks.in_daemon_cgroup(pid, d.state_tag) for pid, _ in idents)
        state_dir, tag = d.state_dir, d.state_tag
    assert d.checked_processes == len(idents)
    assert d.leaked_pids == []
    assert not d.leftovers, d.leftovers.describe()
    assert not leaks.leftovers(state_dir, tag)
    assert not os.path.exists(d.dir)


def test_unix_socket_transport():
    with Daemon(["--prewarm", "none"], transport="unix") as d:
        assert d.listen.startswith("unix:")
        assert d.get_json("/icebox/v1/instances") == []
    assert not d.leftovers
