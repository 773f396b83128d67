"""Start and stop a private iceboxd for one experiment; the one launcher of `icebox-bench`,
the soak and bench/node (which imports it by path with the system python3, so this module and
what it imports use the standard library only).

A temporary state directory, a free TCP port on 127.0.0.1 or a UNIX socket, a fresh API key
(--auth), the repository's runtimes. Stopped with SIGTERM (the daemon then removes every
instance), SIGKILL only if it ignores that; then checked: every instance process it listed is
gone, and nothing tied to its state directory or cgroups is left (leaks.py). The environment's
ICEBOX_* variables are not passed on: iceboxd reads its flags from them, and the experiment must
be defined by its own arguments.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from . import leaks, localhttp, paths, procfs

# A UNIX socket path must fit in sun_path (108 bytes).
_SUN_PATH_MAX = 100


class DaemonError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def temp_dir(prefix: str) -> str:
    """A new temp dir, short enough to hold UNIX sockets."""
    base = tempfile.gettempdir()
    if len(base) > 40:
        base = "/tmp"
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without ICEBOX_* settings, which would change the daemon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEBOX_")}
    env.update(extra or {})
    return env


def remove_tree(path: str) -> None:
    """Remove a temp dir unless something is still mounted inside it (never follow a mount)."""
    mounts = procfs.mounts_under(path)
    if mounts:
        print(f"warning: leaving {path} in place: {len(mounts)} mount(s) remain under it")
        return
    shutil.rmtree(path, ignore_errors=True)


class Daemon:
    """An iceboxd process. Use as a context manager; `stop()` is idempotent.

    `transport` is "tcp" (127.0.0.1 and a free port; `apihost` is its URL) or "unix" (a socket
    in the temp dir; `listen` is `unix:PATH`). `args` are extra flags. After `stop()`:
    `stop_seconds`, `checked_processes` (instance processes listed before SIGTERM, and any
    given to stop()), `leaked_pids`
    (those still alive 5 s after the daemon exited, then killed) and `leftovers`.
    """

    def __init__(
        self,
        args: list[str] | None = None,
        *,
        transport: str = "tcp",
        label: str = "iceboxd",
        log_path: Path | None = None,
        binary: Path | None = None,
        start_timeout_s: float = 30.0,
    ):
        if transport not in ("tcp", "unix"):
            raise ValueError(f"transport must be tcp or unix, not {transport!r}")
        self.binary = Path(binary) if binary else paths.iceboxd_binary()
        if not self.binary.is_file():
            raise DaemonError(
                f"{self.binary} is missing: build it with `make build` "
                "(or point ICEBOX_BIN_DIR at a directory holding iceboxd)"
            )
        self.args = list(args or [])
        self.transport = transport
        self.label = label
        self.start_timeout_s = start_timeout_s
        self.auth = f"{uuid.uuid4()}:{secrets.token_hex(16)}"
        self.dir = temp_dir("icebox-bench-")
        self.state_dir = os.path.join(self.dir, "state")
        self.log_path = Path(log_path) if log_path else Path(self.dir) / "iceboxd.log"
        self.listen = ""
        self.apihost = ""
        self.health: dict = {}
        self.proc: subprocess.Popen | None = None
        self.stop_seconds: float | None = None
        self.checked_processes = 0
        self.leaked_pids: list[int] = []
        self.leftovers = leaks.Leftovers()

    # ---- life cycle -------------------------------------------------------------------

    def __enter__(self) -> Daemon:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def argv(self, listen: str) -> list[str]:
        return [
            str(self.binary),
            "--listen",
            listen,
            "--state-dir",
            self.state_dir,
            "--auth",
            self.auth,
            "--runtimes-dir",
            str(paths.runtimes_dir()),
            *self.args,
        ]

    def _choose_listen(self) -> str:
        if self.transport == "unix":
            path = os.path.join(self.dir, "api.sock")
            if len(path) > _SUN_PATH_MAX:
                raise DaemonError(f"socket path too long for AF_UNIX: {path}")
            self.apihost = ""
            return "unix:" + path
        port = free_port()
        self.apihost = f"http://127.0.0.1:{port}"
        return f"127.0.0.1:{port}"

    def start(self) -> None:
        for attempt in range(3):
            self.listen = self._choose_listen()
            with open(self.log_path, "ab") as log:
                # Own session: Ctrl-C reaches only the harness, which stops the daemon in order.
                self.proc = subprocess.Popen(
                    self.argv(self.listen),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=clean_env(),
                    cwd=self.dir,
                    start_new_session=True,
                )
            if self._wait_healthy():
                return
            self.proc.wait()
            # Someone else took the free port between our check and the daemon's bind: retry.
            if self.transport != "tcp" or "cannot listen" not in self.log_tail() or attempt == 2:
                break
        raise DaemonError(f"{self.label} did not start; the end of its log ({self.log_path}):\n{self.log_tail()}")

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                self.health = localhttp.get_json(self.listen, "/icebox/v1/health", None, timeout=1.0)
                return True
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        self.proc.kill()
        return False

    def stop(self, also_check: Iterable[tuple[int, int]] = ()) -> None:
        """SIGTERM, wait for the daemon to remove its instances, then verify none survived:
        those it lists now and `also_check`, (pid, start time) of instance processes seen
        earlier."""
        proc, self.proc = self.proc, None
        if proc is not None:
            idents = set(also_check)
            if proc.poll() is None:
                idents |= set(self.instance_identities())
                t0 = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    print(f"warning: {self.label} ignored SIGTERM for 120 s; killing it")
                    proc.kill()
                    proc.wait()
                self.stop_seconds = time.monotonic() - t0
            else:
                proc.wait()
            self.checked_processes = len(idents)
            self.leaked_pids = self._reap(sorted(idents))
            self.leftovers = leaks.wait_for_no_leftovers(self.state_dir, self.state_tag, 5.0)
            if self.leftovers:
                print(f"warning: {self.label} left {self.leftovers.describe()}; removing them")
                leaks.remove(self.leftovers)
        remove_tree(self.dir)

    def _reap(self, idents: list[tuple[int, int]]) -> list[int]:
        """Instance processes still alive 5 s after the daemon exited are a leak: report and
        kill them (they are ours: our daemon started them)."""
        deadline = time.monotonic() + 5
        alive = [i for i in idents if procfs.still_running(i)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [i for i in alive if procfs.still_running(i)]
        for pid, _ in alive:
            print(f"warning: instance process {pid} outlived {self.label}; killing it")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return [pid for pid, _ in alive]

    # ---- while it runs ----------------------------------------------------------------

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise DaemonError(f"{self.label} is not running")
        return self.proc.pid

    @property
    def state_tag(self) -> str:
        return leaks.state_tag(self.state_dir)

    def get_json(self, path: str, timeout: float = 10.0):
        return localhttp.get_json(self.listen, path, self.auth, timeout)

    def instances(self) -> list[dict]:
        """GET /icebox/v1/instances."""
        return self.get_json("/icebox/v1/instances")

    def instance_identities(self) -> list[tuple[int, int]]:
        """(pid, start time) of every process of every instance; empty if the daemon does not
        answer (it is then being stopped anyway)."""
        try:
            views = self.instances()
        except (OSError, ValueError):
            return []
        return [ident for view in views for pid in view.get("pids") or [] if (ident := procfs.identity(pid))]

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
