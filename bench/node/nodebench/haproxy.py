"""haproxy (Debian's) forwarding HTTP from its own UNIX socket to a bare proxy's: the cost of
one well-made reverse-proxy hop, measured beside iceboxd as a second baseline. It parses every
request and response as iceboxd does, keeps connections alive on both sides, and does nothing
else (no auth, no pool, no record)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from .client import Client, Endpoint, wait_until_connectable
from .daemon import remove_tree, temp_dir

CONFIG = """global
    maxconn 256
    nbthread 1

defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s

frontend front
    bind unix@{front}
    default_backend proxy

backend proxy
    http-reuse always
    server bare unix@{backend}
"""


def unavailable() -> str | None:
    """Why there is no haproxy baseline here, or None."""
    if shutil.which("haproxy") is None:
        return "haproxy is not installed (scripts/setup.sh installs Debian's)"
    return None


class HaproxyHop:
    def __init__(self, backend_socket: str):
        self.dir = temp_dir("icebox-bench-haproxy-")
        self.endpoint = Endpoint.unix(os.path.join(self.dir, "front.sock"))
        self.config = os.path.join(self.dir, "haproxy.cfg")
        with open(self.config, "w") as f:
            f.write(CONFIG.format(front=self.endpoint.path, backend=backend_socket))
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> HaproxyHop:
        try:
            with open(os.path.join(self.dir, "haproxy.log"), "ab") as log:
                # -db: stay in the foreground, so this PID is the one to stop.
                self.proc = subprocess.Popen(
                    ["haproxy", "-db", "-f", self.config],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            wait_until_connectable(self.endpoint, 30.0, alive=lambda: self.proc.poll() is None)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        remove_tree(self.dir)

    def client(self) -> Client:
        return Client(self.endpoint, None, timeout=60)
