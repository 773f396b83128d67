"""The live heap of a bare runtime, to subtract from each function's live bytes.

The start-up memory (`runtime_ready`) already holds the runtime's own live objects: the
proxy's, and for CPython the interpreter's modules and code objects, most of its ~3.5 MiB.
`live_bytes` at an exit counts them again, so start-up + live_bytes would count them twice
(measured: Python `hello` came out at real/ideal = 0.66). The ideal therefore adds only what
the function keeps alive beyond a bare runtime:

    ideal_i = M_ready + max(0, live_i - L0)

where L0 is the live bytes, after one invocation, of a no-op action in the same runtime kind,
measured with the same `/stats?gc=1` call (so whatever the stats call itself loads, e.g.
CPython's ctypes, is in both terms and cancels out).

The no-op instance is then kept alive (frozen) until the recipe ends, as a *companion*: USS
counts a file-backed page as private when no other process maps it, so a lone instance's USS
includes the runtime's shared libraries (libjvm.so, libpython, the node binary: 10+ MiB) and
drops by that much as soon as another instance of the language starts — on a shared machine,
whenever someone else's does. With a companion mapping them, the runtime's libraries are
always shared, as the paper assumes ("shared libraries ... are shared by multiple FaaS
instances with the same language"), and the measurements do not depend on what else runs.
"""

from __future__ import annotations

import base64

from .. import paths
from ..client import IceboxClient, IceboxError
from ..invoke import invoke_once

_SOURCE = {
    "python": "def main(args):\n    return {}\n",
    "nodejs": "function main(args) {\n  return {};\n}\n",
}


def noop_exec(language: str, kind: str) -> dict | None:
    """The `exec` of a no-op action for `language`, or None if there is none to be had."""
    if language in _SOURCE:
        return {"kind": kind, "code": _SOURCE[language], "binary": False}
    if language == "java":
        jar = paths.java_examples_jar()
        if jar.is_file():
            return {
                "kind": kind,
                "code": base64.b64encode(jar.read_bytes()).decode("ascii"),
                "binary": True,
                "main": "Hello",
            }
    return None


def companion_action(language: str) -> str:
    return f"frozen-garbage.baseline-{language}"


async def start_companion(client: IceboxClient, language: str, kind: str, memory_mb: int | None) -> dict:
    """Start the no-op instance and measure L0: {"live_bytes", "instance", "action"}.
    The instance stays until stop_companion; raises IceboxError on failure."""
    exec_body = noop_exec(language, kind)
    if exec_body is None:
        raise IceboxError(
            f"no no-op action for {language} (for Java, `make setup` builds "
            f"{paths.java_examples_jar().relative_to(paths.REPO_ROOT)})"
        )
    action = companion_action(language)
    body: dict = {"exec": exec_body}
    if memory_mb:
        body["limits"] = {"memory": memory_mb}
    await client.put_action(action, body)
    try:
        fields = await invoke_once(client, action, {})
        if fields["status"] != "success":
            raise IceboxError(f"the {language} no-op action failed: {fields.get('error')}")
        stats = await client.instance_stats(fields["instance"], gc=True)
        if not isinstance(stats.get("live_bytes"), int):
            raise IceboxError(f"the {language} runtime reported no live_bytes after ?gc=1")
    except IceboxError:
        await stop_companion(client, language)
        raise
    return {"live_bytes": stats["live_bytes"], "instance": fields["instance"], "action": action}


async def stop_companion(client: IceboxClient, language: str) -> None:
    """Delete the no-op action, which evicts its instance."""
    try:
        await client.delete_action(companion_action(language))
    except IceboxError:
        pass
