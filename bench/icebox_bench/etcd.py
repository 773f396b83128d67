"""A private etcd cluster on loopback for one experiment (the `cluster` recipe and its tests).

`members` etcd processes (Debian's `etcd-server`, /usr/bin/etcd), each with its own data
directory in one temporary directory and its own free client and peer ports, joined as a new
cluster with a random token (so a stray member of another run can never join). Started in
parallel, since a member only reports healthy once a quorum is up; stopped by PID (SIGTERM,
SIGKILL after a grace period), then the directory is removed. The caller's ETCD_* variables
are not passed on: etcd reads its flags from them.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .daemon import free_port, temp_dir


class EtcdError(RuntimeError):
    pass


def etcd_binary() -> Path:
    found = shutil.which("etcd")
    return Path(found) if found else Path("/usr/bin/etcd")


@dataclass(frozen=True)
class Member:
    name: str
    client_port: int
    peer_port: int

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"


def initial_cluster(members: list[Member]) -> str:
    return ",".join(f"{m.name}={m.peer_url}" for m in members)


def member_argv(binary: Path, member: Member, data_dir: Path, members: list[Member], token: str) -> list[str]:
    return [
        str(binary),
        "--name",
        member.name,
        "--data-dir",
        str(data_dir),
        "--listen-client-urls",
        member.client_url,
        "--advertise-client-urls",
        member.client_url,
        "--listen-peer-urls",
        member.peer_url,
        "--initial-advertise-peer-urls",
        member.peer_url,
        "--initial-cluster",
        initial_cluster(members),
        "--initial-cluster-state",
        "new",
        "--initial-cluster-token",
        token,
    ]


def cluster_flag(members: list[Member]) -> str:
    """What `iceboxd --cluster` takes: etcd://host:port,host:port,..."""
    return "etcd://" + ",".join(f"127.0.0.1:{m.client_port}" for m in members)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}


class EtcdCluster:
    """Use as a context manager; `stop()` is idempotent."""

    def __init__(
        self,
        members: int = 3,
        *,
        binary: Path | None = None,
        log_dir: Path | None = None,
        start_timeout_s: float = 30.0,
    ):
        if members < 1:
            raise ValueError("an etcd cluster needs at least one member")
        self.binary = Path(binary) if binary else etcd_binary()
        if not self.binary.is_file():
            raise EtcdError(f"{self.binary} is missing: install the Debian package etcd-server (scripts/setup.sh does)")
        self.count = members
        self.start_timeout_s = start_timeout_s
        self.dir = temp_dir("icebox-etcd-")
        self.log_dir = Path(log_dir) if log_dir else Path(self.dir)
        self.token = "icebox-bench-" + secrets.token_hex(8)
        self.members: list[Member] = []
        self.procs: list[subprocess.Popen | None] = []

    def __enter__(self) -> EtcdCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def cluster_flag(self) -> str:
        return cluster_flag(self.members)

    def log_path(self, k: int) -> Path:
        return self.log_dir / f"etcd-{self.members[k].name}.log"

    def start(self) -> None:
        self.members = [Member(f"e{k}", free_port(), free_port()) for k in range(self.count)]
        for k, member in enumerate(self.members):
            data = Path(self.dir) / member.name
            with open(self.log_path(k), "ab") as log:
                self.procs.append(
                    subprocess.Popen(
                        member_argv(self.binary, member, data, self.members, self.token),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=_env(),
                        cwd=self.dir,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + self.start_timeout_s
        for k in range(self.count):
            while not self.healthy(k):
                proc = self.procs[k]
                if proc is not None and proc.poll() is not None:
                    raise EtcdError(f"etcd member {self.members[k].name} exited: {self.log_tail(k)}")
                if time.monotonic() > deadline:
                    raise EtcdError(
                        f"etcd member {self.members[k].name} not healthy after {self.start_timeout_s:.0f} s: "
                        f"{self.log_tail(k)}"
                    )
                time.sleep(0.1)

    def healthy(self, k: int) -> bool:
        """The member answers /health with true (it needs a quorum for that)."""
        try:
            with urllib.request.urlopen(self.members[k].client_url + "/health", timeout=1.0) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def stop_member(self, k: int, sig: int = signal.SIGTERM) -> None:
        """Stops one member by its PID (a fault to inject); the others keep running."""
        proc, self.procs[k] = self.procs[k], None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        for k in range(len(self.procs)):
            self.stop_member(k)
        shutil.rmtree(self.dir, ignore_errors=True)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None]

    def log_tail(self, k: int, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path(k).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # ---- etcd's v3 JSON gateway: enough to check the cluster from a test ----------------

    def _post(self, k: int, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.members[k].client_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5.0) as r:
                return json.loads(r.read())
        except urllib.error.URLError as e:
            raise EtcdError(f"etcd {self.members[k].name} {path}: {e}") from None

    def put(self, k: int, key: str, value: str) -> None:
        self._post(k, "/v3/kv/put", {"key": _b64(key), "value": _b64(value)})

    def get(self, k: int, key: str) -> str | None:
        kvs = self._post(k, "/v3/kv/range", {"key": _b64(key)}).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")
