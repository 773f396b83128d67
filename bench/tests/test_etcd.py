"""The private etcd cluster of the `cluster` recipe (icebox_bench/etcd.py): the flags it gives
each member, and a real 3-member cluster on loopback (Debian's etcd-server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from icebox_bench import etcd


def test_members_join_one_new_cluster_on_their_own_ports_and_dirs(tmp_path):
    members = [etcd.Member("e0", 2001, 3001), etcd.Member("e1", 2002, 3002), etcd.Member("e2", 2003, 3003)]
    argv = etcd.member_argv(Path("/usr/bin/etcd"), members[1], tmp_path / "e1", members, "tok")
    flags = dict(zip(argv[1::2], argv[2::2], strict=True))
    assert flags["--name"] == "e1"
    assert flags["--data-dir"] == str(tmp_path / "e1")
    assert flags["--listen-client-urls"] == flags["--advertise-client-urls"] == "http://127.0.0.1:2002"
    assert flags["--listen-peer-urls"] == flags["--initial-advertise-peer-urls"] == "http://127.0.0.1:3002"
    assert flags["--initial-cluster"] == ("e0=http://127.0.0.1:3001,e1=http://127.0.0.1:3002,e2=http://127.0.0.1:3003")
    assert flags["--initial-cluster-state"] == "new"
    assert flags["--initial-cluster-token"] == "tok"
    assert etcd.cluster_flag(members) == "etcd://127.0.0.1:2001,127.0.0.1:2002,127.0.0.1:2003"


def test_a_missing_binary_is_a_clear_error(tmp_path):
    with pytest.raises(etcd.EtcdError, match="etcd-server"):
        etcd.EtcdCluster(binary=tmp_path / "no-etcd")


@pytest.mark.skipif(not etcd.etcd_binary().is_file(), reason="etcd-server is not installed (scripts/setup.sh)")
def test_three_members_are_one_cluster_that_survives_one_member_and_leaves_nothing():
    with etcd.EtcdCluster(3) as cluster:
        pids = cluster.pids()
        assert len(pids) == 3
        data_dir = Path(cluster.dir)
        assert all(cluster.healthy(k) for k in range(3))
        cluster.put(0, "/icebox/test", "written on e0")
        assert cluster.get(2, "/icebox/test") == "written on e0"
        # One member down: the other two still hold a quorum and serve reads and writes.
        cluster.stop_member(1)
        cluster.put(2, "/icebox/test", "after e1 stopped")
        assert cluster.get(0, "/icebox/test") == "after e1 stopped"
        assert cluster.healthy(0) and not cluster.healthy(1)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not data_dir.exists()
