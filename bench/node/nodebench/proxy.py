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


class DirectProxy:
    def __init__(self, lang: str):
        manifest = json.loads((RUNTIMES / lang / "runtime.json").read_text())
        runtime_dir = str(RUNTIMES / lang)
        self.argv = [a.replace("{runtime_dir}", runtime_dir) for a in manifest["command"]]
        self.env_extra = {k: str(v).replace("{runtime_dir}", runtime_dir) for k, v in manifest.get("env", {}).items()}
        self.lang = lang
        self.dir = temp_dir(f"icebox-bench-{lang}-")
        self.endpoint = Endpoint.unix(os.path.join(self.dir, "proxy.sock"))
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "DirectProxy":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        env = clean_env({
            "ICEBOX_PROXY_SOCKET": self.endpoint.path,
            "ICEBOX_CONCURRENCY": "1",
            "__OW_API_HOST": "",
            "HOME": self.dir,
            "TMPDIR": self.dir,
            **self.env_extra,
        })
        # The proxy writes sentinel lines after every activation: a file never blocks it.
        with open(os.path.join(self.dir, "proxy.log"), "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, cwd=self.dir, start_new_session=True,
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
    return json.dumps({
        "value": params,
        "namespace": namespace,
        "action_name": f"/{namespace}/{action}",
        "activation_id": activation,
        "transaction_id": activation,
        "api_key": "",
        "deadline": str(int(time.time() * 1000) + 600_000),
        "action_version": "0.0.1",
    }).encode()
