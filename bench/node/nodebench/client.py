"""Keep-alive HTTP/1.1 clients over TCP or a UNIX socket (http.client underneath)."""

from __future__ import annotations

import base64
import http.client
import json
import time
from dataclasses import dataclass

from icebox_bench.localhttp import UnixHTTPConnection


@dataclass(frozen=True)
class Endpoint:
    """Where an HTTP server listens: `tcp` with host and port, or `unix` with a socket path."""

    transport: str
    host: str = "127.0.0.1"
    port: int = 0
    path: str = ""

    @staticmethod
    def tcp(host: str, port: int) -> Endpoint:
        return Endpoint("tcp", host=host, port=port)

    @staticmethod
    def unix(path: str) -> Endpoint:
        return Endpoint("unix", path=path)

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.transport == "unix":
            return UnixHTTPConnection(self.path, timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def describe(self) -> str:
        return f"unix:{self.path}" if self.transport == "unix" else f"{self.host}:{self.port}"


@dataclass
class Reply:
    status: int
    body: bytes

    def json(self):
        return json.loads(self.body) if self.body else None


class HttpError(RuntimeError):
    def __init__(self, method: str, path: str, reply: Reply):
        text = reply.body[:500].decode("utf-8", "replace")
        super().__init__(f"{method} {path} answered {reply.status}: {text}")
        self.reply = reply


class Client:
    """One persistent connection. Not thread-safe: give every thread its own Client.

    A dropped connection is reopened once per request and counted in `reconnects`, so a
    benchmark can tell when its keep-alive assumption did not hold.
    """

    def __init__(self, endpoint: Endpoint, auth: str | None = None, timeout: float = 120.0):
        self.endpoint = endpoint
        self.timeout = timeout
        self.reconnects = 0
        self._conn: http.client.HTTPConnection | None = None
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if auth:
            token = base64.b64encode(auth.encode()).decode()
            self._headers["Authorization"] = "Basic " + token

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self.endpoint.connect(self.timeout)
                if attempt:
                    self.reconnects += 1
            try:
                self._conn.request(method, path, body=body, headers=self._headers)
                resp = self._conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self.close()
                return Reply(resp.status, data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, payload=None, ok=(200,)) -> Reply:
        """A request with a JSON body whose status must be in `ok`."""
        body = None if payload is None else json.dumps(payload).encode()
        reply = self.request(method, path, body)
        if reply.status not in ok:
            raise HttpError(method, path, reply)
        return reply

    def get_json(self, path: str):
        return self.call("GET", path).json()


def wait_until_connectable(endpoint: Endpoint, timeout: float, alive=lambda: True) -> None:
    """Poll until a connection to `endpoint` succeeds; `alive()` false aborts early."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server behind {endpoint.describe()} exited before it accepted connections")
        conn = endpoint.connect(1.0)
        try:
            conn.connect()
            return
        except OSError as e:
            last = e
        finally:
            conn.close()
        time.sleep(0.01)
    raise TimeoutError(f"nothing accepted connections on {endpoint.describe()} within {timeout:.0f} s ({last})")
