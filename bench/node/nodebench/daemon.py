"""Start and stop an iceboxd for one benchmark: temp state dir, free port or UNIX socket,
known API key; stopped with SIGTERM (SIGKILL only as a last resort) and checked to leave no
instance process behind."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from . import procfs
from .stats import parse_metrics
from .client import Client, Endpoint, wait_until_connectable

REPO = Path(__file__).resolve().parents[3]
DAEMON = REPO / "target" / "release" / "iceboxd"
RUNTIMES = REPO / "runtimes"
AUTH = "bench0000-0000-4000-8000-000000000000:icebox-bench-key"
# A UNIX socket path must fit in sun_path (108 bytes).
_SUN_PATH_MAX = 100


def temp_dir(prefix: str) -> str:
    base = tempfile.gettempdir()
    if len(base) > 40:
        base = "/tmp"
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without ICEBOX_* settings, which would change the daemon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEBOX_")}
    env.update(extra or {})
    return env


def remove_tree(path: str) -> None:
    """Remove a temp dir unless something is still mounted inside it (never follow a mount)."""
    if procfs.mounts_under(path):
        print(f"warning: leaving {path} in place: mounts remain under it")
        return
    shutil.rmtree(path, ignore_errors=True)


class Daemon:
    """An iceboxd process. Use as a context manager; `stop()` is idempotent.

    `transport` is "tcp" (127.0.0.1 and a free port) or "unix" (a socket in the temp dir).
    `args` are extra flags, e.g. ["--pause-grace", "10s"].
    """

    def __init__(self, args: list[str] | None = None, transport: str = "tcp", label: str = "iceboxd"):
        if not DAEMON.is_file():
            raise FileNotFoundError(f"{DAEMON.relative_to(REPO)} is missing: run `make build` first")
        self.args = list(args or [])
        self.transport = transport
        self.label = label
        self.dir = temp_dir("icebox-bench-")
        self.state_dir = os.path.join(self.dir, "state")
        self.log_path = os.path.join(self.dir, "iceboxd.log")
        self.proc: subprocess.Popen | None = None
        self.endpoint: Endpoint | None = None
        self.stop_seconds: float | None = None
        self.leftovers: list[int] = []
        self.checked_processes = 0
        self.health: dict = {}

    # ---- life cycle -------------------------------------------------------------------

    def __enter__(self) -> "Daemon":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        for attempt in range(3):
            if self.transport == "unix":
                path = os.path.join(self.dir, "api.sock")
                if len(path) > _SUN_PATH_MAX:
                    raise ValueError(f"socket path too long for AF_UNIX: {path}")
                self.endpoint = Endpoint.unix(path)
                listen = "unix:" + path
            else:
                port = free_port()
                self.endpoint = Endpoint.tcp("127.0.0.1", port)
                listen = f"127.0.0.1:{port}"
            argv = [
                str(DAEMON),
                "--listen", listen,
                "--state-dir", self.state_dir,
                "--auth", AUTH,
                "--runtimes-dir", str(RUNTIMES),
                *self.args,
            ]
            with open(self.log_path, "ab") as log:
                # Own session: a Ctrl-C on the terminal reaches only the benchmark, which
                # then stops the daemon in order instead of racing it.
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=clean_env(), cwd=self.dir, start_new_session=True,
                )
            try:
                wait_until_connectable(self.endpoint, 30.0, alive=lambda: self.proc.poll() is None)
                self.health = self.wait_healthy()
                return
            except RuntimeError:
                # Lost the race for the free port to someone else: try another one.
                if self.transport == "tcp" and "cannot listen" in self.log_tail() and attempt < 2:
                    self.proc.wait()
                    continue
                raise RuntimeError(f"{self.label} did not start:\n{self.log_tail()}")

    def wait_healthy(self) -> dict:
        with self.client() as c:
            deadline = time.monotonic() + 10
            while True:
                reply = c.request("GET", "/icebox/v1/health")
                if reply.status == 200:
                    return reply.json()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.label} is not healthy: {reply.status} {reply.body[:200]!r}")
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, wait for the daemon to remove its instances, then verify none survived."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            idents = self._instance_processes()
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                print(f"warning: {self.label} ignored SIGTERM for 120 s; killing it")
                proc.kill()
                proc.wait()
            self.stop_seconds = time.monotonic() - t0
            self.checked_processes = len(idents)
            self.leftovers = self._reap(idents)
        elif proc is not None:
            proc.wait()
        remove_tree(self.dir)

    def _instance_processes(self) -> list[tuple[int, int]]:
        try:
            with self.client(timeout=10) as c:
                views = c.get_json("/icebox/v1/instances")
        except Exception:
            return []
        idents = []
        for view in views:
            for pid in view.get("pids") or []:
                ident = procfs.identity(pid)
                if ident:
                    idents.append(ident)
        return idents

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

    # ---- helpers ----------------------------------------------------------------------

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.label} is not running")
        return self.proc.pid

    def client(self, timeout: float = 120.0) -> Client:
        return Client(self.endpoint, AUTH, timeout)

    def metrics(self) -> list[tuple[str, dict[str, str], float]]:
        """A scrape of GET /metrics, parsed."""
        with self.client() as c:
            reply = c.call("GET", "/metrics")
        return parse_metrics(reply.body.decode())

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""

    def isolation_note(self) -> str:
        h = self.health
        return (f"{self.label}: isolation {h.get('isolation', '?')}, cgroup {h.get('cgroup', '?')}, "
                f"flags: {' '.join(self.args) or '(defaults)'}.")

    def stop_note(self) -> str:
        """One line for the report: how the daemon stopped and whether anything leaked."""
        if self.stop_seconds is None:
            return f"{self.label}: not stopped cleanly"
        leak = (f"LEAKED {len(self.leftovers)} instance process(es): {self.leftovers}"
                if self.leftovers else "no instance process left behind")
        return (f"{self.label} stopped on SIGTERM in {self.stop_seconds * 1000:.0f} ms; "
                f"{self.checked_processes} instance process(es) checked, {leak}.")
