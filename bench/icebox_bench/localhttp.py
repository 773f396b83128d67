"""http.client to a local iceboxd over TCP or a UNIX socket, for the launcher's own few calls
(health, instances) and bench/node's keep-alive client. Standard library only."""

from __future__ import annotations

import base64
import http.client
import json
import socket


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket; the Host header says `localhost`."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class StatusError(OSError):
    """A local call answered something other than 200."""


def connect(listen: str, timeout: float) -> http.client.HTTPConnection:
    """A connection to what `iceboxd --listen` was given: `unix:PATH` or `HOST:PORT`."""
    if listen.startswith("unix:"):
        return UnixHTTPConnection(listen[len("unix:") :], timeout)
    host, _, port = listen.rpartition(":")
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def basic_auth(auth: str) -> str:
    return "Basic " + base64.b64encode(auth.encode()).decode("ascii")


def get(listen: str, path: str, auth: str | None, timeout: float = 10.0) -> tuple[int, bytes]:
    """One GET on a fresh connection: (status, body). Connection errors propagate (OSError)."""
    conn = connect(listen, timeout)
    try:
        conn.request("GET", path, headers={"Authorization": basic_auth(auth)} if auth else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get_json(listen: str, path: str, auth: str | None, timeout: float = 10.0):
    status, body = get(listen, path, auth, timeout)
    if status != 200:
        raise StatusError(f"GET {path} answered {status}: {body[:200]!r}")
    return json.loads(body)
