"""Asynchronous client for iceboxd's OpenWhisk API and node API (docs/api/openapi.yaml)."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from urllib.parse import quote

import aiohttp

from . import paths

DEFAULT_APIHOST = "http://127.0.0.1:8740"
# A blocking invocation answers 202 after 60 s (OpenWhisk); give the answer time to arrive.
BLOCKING_WAIT_S = 75.0


class IceboxError(RuntimeError):
    """Anything that went wrong talking to iceboxd; the message says what and where."""


class DaemonUnreachable(IceboxError):
    pass


class ApiError(IceboxError):
    def __init__(self, method: str, path: str, status: int, message: str):
        super().__init__(f"{method} {path} answered {status}: {message}")
        self.status = status
        self.message = message


def resolve_apihost(value: str | None) -> str:
    host = value or os.environ.get("ICEBOX_APIHOST") or DEFAULT_APIHOST
    if "://" not in host:
        host = "http://" + host
    return host.rstrip("/")


def resolve_auth(value: str | None) -> str:
    """--auth, else ICEBOX_AUTH, else the key `make run` wrote to var/auth."""
    if value:
        return value
    if os.environ.get("ICEBOX_AUTH"):
        return os.environ["ICEBOX_AUTH"]
    auth_file = paths.default_auth_file()
    if auth_file.is_file():
        return auth_file.read_text().strip()
    raise IceboxError(
        "no API key: pass --auth uuid:key or set ICEBOX_AUTH "
        "(`make run` keeps its key in var/auth: export ICEBOX_AUTH=$(cat var/auth))"
    )


@dataclass
class Reply:
    status: int
    body: object  # parsed JSON, or the text when the body is not JSON
    retry_after: str | None = None

    def error_message(self) -> str:
        if isinstance(self.body, dict) and "error" in self.body:
            return str(self.body["error"])
        if isinstance(self.body, dict) and isinstance(self.body.get("response"), dict):
            result = self.body["response"].get("result")
            if isinstance(result, dict) and "error" in result:
                return str(result["error"])
        return str(self.body)[:300]


class IceboxClient:
    """One aiohttp session with an unbounded connection pool (an open-loop load generator must
    never queue behind its own connection limit). Use as an async context manager."""

    def __init__(self, apihost: str, auth: str, *, namespace: str = "_"):
        self.apihost = resolve_apihost(apihost)
        # The header is built here: aiohttp's BasicAuth helper is deprecated in recent versions.
        self._headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode("ascii")}
        self.namespace = namespace
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> IceboxClient:
        connector = aiohttp.TCPConnector(limit=0, force_close=False, enable_cleanup_closed=True)
        self.session = aiohttp.ClientSession(
            base_url=self.apihost,
            headers=self._headers,
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, connect=10),
        )
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    # ---- plumbing -----------------------------------------------------------------------

    def action_path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/actions/{quote(name, safe='@.-_')}"

    async def request(
        self, method: str, path: str, *, params=None, payload=None, timeout_s: float | None = 30.0
    ) -> Reply:
        """One request; connection failures become DaemonUnreachable / IceboxError."""
        assert self.session is not None, "use the client as an async context manager"
        timeout = aiohttp.ClientTimeout(total=timeout_s, connect=10)
        try:
            async with self.session.request(method, path, params=params, json=payload, timeout=timeout) as resp:
                text = await resp.text()
                try:
                    body = json.loads(text) if text else None
                except ValueError:
                    body = text
                return Reply(resp.status, body, resp.headers.get("Retry-After"))
        except aiohttp.ClientConnectorError as e:
            raise DaemonUnreachable(
                f"cannot reach iceboxd at {self.apihost}: {e.os_error or e}. "
                "Is it running? (`make run`, or pass --apihost)"
            ) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientPayloadError) as e:
            raise IceboxError(f"{method} {path}: connection to iceboxd at {self.apihost} failed: {e}") from None
        except TimeoutError:
            raise IceboxError(
                f"{method} {path}: iceboxd at {self.apihost} did not answer within {timeout_s:.0f} s"
            ) from None

    async def call(self, method: str, path: str, *, ok=(200,), **kw) -> object:
        reply = await self.request(method, path, **kw)
        if reply.status not in ok:
            raise ApiError(method, path, reply.status, reply.error_message())
        return reply.body

    # ---- OpenWhisk API ------------------------------------------------------------------

    async def put_action(self, name: str, body: dict) -> dict:
        return await self.call(
            "PUT", self.action_path(name), params={"overwrite": "true"}, payload=body, timeout_s=120.0
        )

    async def delete_action(self, name: str) -> None:
        await self.call("DELETE", self.action_path(name), ok=(200, 404))

    async def invoke(
        self, name: str, params: dict, *, blocking: bool = True, timeout_s: float = BLOCKING_WAIT_S
    ) -> Reply:
        """POST the invocation; the caller interprets the status (200/202/429/502/...)."""
        query = {"blocking": "true" if blocking else "false"}
        return await self.request("POST", self.action_path(name), params=query, payload=params, timeout_s=timeout_s)

    async def activation(self, activation_id: str) -> dict | None:
        """The finished activation's record, or None while it is still running (404)."""
        reply = await self.request("GET", f"/api/v1/namespaces/{self.namespace}/activations/{activation_id}")
        if reply.status == 404:
            return None
        if reply.status != 200:
            raise ApiError("GET", f"activations/{activation_id}", reply.status, reply.error_message())
        return reply.body

    async def list_activations(self, *, limit: int = 200, skip: int = 0, since_ms: int | None = None) -> list:
        params = {"limit": str(limit), "skip": str(skip)}
        if since_ms is not None:
            params["since"] = str(since_ms)
        return await self.call("GET", f"/api/v1/namespaces/{self.namespace}/activations", params=params)

    # ---- node API -----------------------------------------------------------------------

    async def health(self) -> dict:
        return await self.call("GET", "/icebox/v1/health", timeout_s=10.0)

    async def instances(self) -> list:
        return await self.call("GET", "/icebox/v1/instances")

    async def memory(self) -> dict:
        return await self.call("GET", "/icebox/v1/memory")

    async def instance(self, instance_id: str, *, fresh: bool = False) -> dict:
        params = {"fresh": "true"} if fresh else None
        return await self.call("GET", f"/icebox/v1/instances/{instance_id}", params=params)

    async def instance_stats(self, instance_id: str, *, gc: bool = False) -> dict:
        params = {"gc": "1"} if gc else None
        return await self.call("GET", f"/icebox/v1/instances/{instance_id}/stats", params=params, timeout_s=120.0)


def annotation(record: dict, key: str):
    """An activation record's annotation value, or None."""
    for item in record.get("annotations") or []:
        if isinstance(item, dict) and item.get("key") == key:
            return item.get("value")
    return None
