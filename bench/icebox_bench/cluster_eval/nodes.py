"""A live icebox cluster on loopback: a private etcd (etcd.py) and N iceboxd nodes that share
it, each with its own state directory, port and cgroups, all with the same API key (a
forward carries the caller's key, so every node must accept it).

Each node is started as `iceboxd --cluster etcd://... --node-id nK --advertise URL` plus the
recipe's node flags and its placement policy; stopped like any bench daemon (daemon.py:
SIGTERM, then checked that no instance process or cgroup is left).
"""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

from ..daemon import Daemon
from ..etcd import EtcdCluster
from .analysis import node_ids


class ClusterNode(Daemon):
    def __init__(self, node_id: str, cluster: str, auth: str, args: list[str], *, log_path: Path):
        super().__init__(
            [*args, "--cluster", cluster, "--node-id", node_id], label=f"iceboxd {node_id}", log_path=log_path
        )
        self.node_id = node_id
        self.auth = auth

    def argv(self, listen: str) -> list[str]:
        # The advertised URL is the listen address, known only once the port is chosen.
        return [*super().argv(listen), "--advertise", f"http://{listen}"]


def node_args(base: list[str], placement: str, pool_memory: str) -> list[str]:
    return [*base, "--placement", placement, "--pool-memory", pool_memory]


class LiveCluster:
    """etcd, then the nodes; stopped in the reverse order. Use as a context manager."""

    def __init__(self, nodes: int, args: list[str], log_dir: Path, *, etcd_members: int = 3):
        self.count = nodes
        self.args = args
        self.log_dir = log_dir
        self.etcd = EtcdCluster(etcd_members, log_dir=log_dir)
        self.auth = f"{uuid.uuid4()}:{secrets.token_hex(16)}"
        self.nodes: list[ClusterNode] = []

    def __enter__(self) -> LiveCluster:
        try:
            self.etcd.start()
            for node_id in node_ids(self.count):
                node = ClusterNode(
                    node_id,
                    self.etcd.cluster_flag,
                    self.auth,
                    self.args,
                    log_path=self.log_dir / f"iceboxd-{node_id}.log",
                )
                self.nodes.append(node)
                node.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def apihosts(self) -> list[str]:
        return [n.apihost for n in self.nodes]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        self.etcd.stop()
