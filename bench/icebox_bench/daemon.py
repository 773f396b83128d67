"""Start and stop a private iceboxd for one experiment.

A free TCP port on 127.0.0.1, a temporary state directory, a fresh API key (--auth), the
repository's runtimes; stopped with SIGTERM (the daemon then removes every instance) and
SIGKILL only if it ignores that. The environment's ICEBOX_* variables are not passed on:
iceboxd reads its flags from them, and the experiment must be defined by its own arguments.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from . import paths


class DaemonError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mounts_under(path: str) -> list[str]:
    prefix = os.path.realpath(path).rstrip("/") + "/"
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mount_point = line.split()[4].replace("\\040", " ")
                if mount_point.startswith(prefix):
                    found.append(mount_point)
    except OSError:
        pass
    return found


class Daemon:
    """Use as a context manager; `apihost` and `auth` are set while it runs."""

    def __init__(self, args: list[str] | None = None, *, log_path: Path | None = None,
                 binary: Path | None = None, start_timeout_s: float = 30.0):
        self.binary = Path(binary) if binary else paths.iceboxd_binary()
        if not self.binary.is_file():
            raise DaemonError(f"{self.binary} is missing: build it with `make build` "
                              "(or point ICEBOX_BIN_DIR at a directory holding iceboxd)")
        self.args = list(args or [])
        self.start_timeout_s = start_timeout_s
        self.auth = f"{uuid.uuid4()}:{secrets.token_hex(16)}"
        self.dir = tempfile.mkdtemp(prefix="icebox-bench-")
        self.state_dir = os.path.join(self.dir, "state")
        self.log_path = Path(log_path) if log_path else Path(self.dir) / "iceboxd.log"
        self.apihost = ""
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Daemon":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def argv(self, port: int) -> list[str]:
        return [str(self.binary), "--listen", f"127.0.0.1:{port}", "--state-dir", self.state_dir,
                "--auth", self.auth, "--runtimes-dir", str(paths.runtimes_dir()), *self.args]

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ICEBOX_")}
        for attempt in range(3):
            port = free_port()
            self.apihost = f"http://127.0.0.1:{port}"
            with open(self.log_path, "ab") as log:
                # Own session: Ctrl-C reaches only the harness, which stops the daemon in order.
                self.proc = subprocess.Popen(self.argv(port), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env, cwd=self.dir,
                                             start_new_session=True)
            if self._wait_healthy():
                return
            self.proc.wait()
            # Someone else took the free port between our check and the daemon's bind: retry.
            if "cannot listen" not in self.log_tail() or attempt == 2:
                break
        raise DaemonError(f"iceboxd did not start; the end of its log ({self.log_path}):\n{self.log_tail()}")

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.apihost + "/icebox/v1/health", timeout=1) as resp:
                    if resp.status == 200:
                        self.health = json.loads(resp.read())
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        self.proc.kill()
        return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        elif proc is not None:
            proc.wait()
        mounts = _mounts_under(self.dir)
        if mounts:
            print(f"warning: leaving {self.dir} in place: {len(mounts)} mounts remain under it")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
