"""A runtime's action proxy started bare, without iceboxd: the baseline of the warm-latency
benchmark. The command line comes from the same runtimes/<lang>/runtime.json the daemon reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

from .client import Client, Endpoint, wait_until_connectable
from .daemon import RUNTIMES, clean_env, remove_tree, temp_dir

# An action's memory limit when it sets none (crates/icebox-core/src/action.rs).
DEFAULT_MEMORY_MB = 256


def expand(text: str, runtime_dir: str, memory_mb: int) -> str:
    """A manifest argument with its placeholders replaced, by the daemon's rule
    (crates/icebox-sandbox/src/manifest.rs): the heap may take 3/5 of the memory limit."""
    return (
        text.replace("{runtime_dir}", runtime_dir)
        .replace("{memory_mb}", str(memory_mb))
        .replace("{heap_mb}", str(memory_mb * 3 // 5))
    )


class DirectProxy:
    """`memory_mb` stands for the limit the daemon would start the proxy under (only the
    command line sees it: a bare proxy runs in no cgroup)."""

    def __init__(self, lang: str, memory_mb: int = DEFAULT_MEMORY_MB):
        manifest = json.loads((RUNTIMES / lang / "runtime.json").read_text())
        runtime_dir = str(RUNTIMES / lang)
        self.argv = [expand(a, runtime_dir, memory_mb) for a in manifest["command"]]
        self.env_extra = {k: expand(str(v), runtime_dir, memory_mb) for k, v in manifest.get("env", {}).items()}
        self.lang = lang
        self.dir = temp_dir(f"icebox-bench-{lang}-")
        self.endpoint = Endpoint.unix(os.path.join(self.dir, "proxy.sock"))
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> DirectProxy:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        env = clean_env(
            {
                "ICEBOX_PROXY_SOCKET": self.endpoint.path,
                "ICEBOX_CONCURRENCY": "1",
                "__OW_API_HOST": "",
                "HOME": self.dir,
                "TMPDIR": self.dir,
                **self.env_extra,
            }
        )
        # The proxy writes sentinel lines after every activation: a file never blocks it.
        with open(os.path.join(self.dir, "proxy.log"), "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=self.dir,
                start_new_session=True,
            )
        wait_until_connectable(self.endpoint, 30.0, alive=lambda: self.proc.poll() is None)

    def stop(self) -> None:
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

    def init(self, client: Client, name: str, code: str, main: str = "main", binary: bool = False) -> None:
        client.call("POST", "/init", {"value": {"name": name, "main": main, "code": code, "binary": binary, "env": {}}})


def run_body(params: dict, action: str, namespace: str = "guest") -> bytes:
    """A /run request shaped like the one iceboxd sends (docs/runtime-protocol.md). Built once
    and reused, so the baseline loop carries no client-side encoding cost."""
    activation = uuid.uuid4().hex
    return json.dumps(
        {
            "value": params,
            "namespace": namespace,
            "action_name": f"/{namespace}/{action}",
            "activation_id": activation,
            "transaction_id": activation,
            "api_key": "",
            "deadline": str(int(time.time() * 1000) + 600_000),
            "action_version": "0.0.1",
        }
    ).encode()
