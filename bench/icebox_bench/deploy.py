"""Deploy benchmark functions as actions (PUT ?overwrite=true, as `wsk action update`)."""

from __future__ import annotations

from .archive import exec_body
from .client import ApiError, IceboxClient
from .manifest import FunctionSpec


def action_body(spec: FunctionSpec) -> dict:
    body: dict = {"exec": exec_body(spec.path, spec.kind, spec.main)}
    limits = {}
    if spec.memory_mb is not None:
        limits["memory"] = spec.memory_mb
    if spec.timeout_ms is not None:
        limits["timeout"] = spec.timeout_ms
    if limits:
        body["limits"] = limits
    return body


async def deploy(client: IceboxClient, spec: FunctionSpec, action_name: str | None = None) -> dict:
    """Create or update the action (a new version, so no older instance serves it)."""
    name = action_name or spec.name
    body = action_body(spec)
    try:
        return await client.put_action(name, body)
    except ApiError as e:
        if e.status == 413:
            size_mib = len(body["exec"]["code"]) / (1024 * 1024)
            raise ApiError(
                "PUT",
                name,
                413,
                f"function {spec.name}'s code is {size_mib:.1f} MiB as sent, over "
                "the daemon's code or request-body limit (iceboxd --max-code-size, --max-body)",
            ) from None
        raise ApiError("PUT", name, e.status, f"deploying {spec.name} ({spec.path.name}): {e.message}") from None


async def put_body(client: IceboxClient, action: str, body: dict, what: str) -> dict:
    """Create or update `action` with a prepared body; a refusal names `what` was deployed."""
    try:
        return await client.put_action(action, body)
    except ApiError as e:
        raise ApiError("PUT", action, e.status, f"deploying {what}: {e.message}") from None


async def deploy_all(client: IceboxClient, specs: list[FunctionSpec], *, log=print) -> list[str]:
    names = []
    for spec in specs:
        action = await deploy(client, spec)
        log(f"deployed {spec.name} ({action['exec']['kind']}, version {action['version']})")
        names.append(spec.name)
    return names
