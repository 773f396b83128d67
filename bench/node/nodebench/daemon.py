"""An iceboxd for one node benchmark: the shared launcher (bench/icebox_bench/daemon.py) with
this suite's keep-alive client and the lines the report prints about the daemon."""

from __future__ import annotations

from icebox_bench import paths
from icebox_bench.daemon import Daemon as Launcher
from icebox_bench.daemon import clean_env, remove_tree, temp_dir  # noqa: F401  (used by proxy.py)

from .client import Client, Endpoint
from .stats import parse_metrics

REPO = paths.REPO_ROOT
RUNTIMES = paths.runtimes_dir()


class Daemon(Launcher):
    """`transport` is "tcp" (127.0.0.1 and a free port) or "unix" (a socket in the temp dir).
    `args` are extra flags, e.g. ["--pause-grace", "10s"]."""

    def __init__(self, args: list[str] | None = None, transport: str = "tcp", label: str = "iceboxd"):
        super().__init__(args, transport=transport, label=label)

    @property
    def endpoint(self) -> Endpoint:
        if self.listen.startswith("unix:"):
            return Endpoint.unix(self.listen[len("unix:") :])
        host, _, port = self.listen.rpartition(":")
        return Endpoint.tcp(host, int(port))

    def client(self, timeout: float = 120.0) -> Client:
        return Client(self.endpoint, self.auth, timeout)

    def metrics(self) -> list[tuple[str, dict[str, str], float]]:
        """A scrape of GET /metrics, parsed."""
        with self.client() as c:
            reply = c.call("GET", "/metrics")
        return parse_metrics(reply.body.decode())

    def isolation_note(self) -> str:
        h = self.health
        return (
            f"{self.label}: isolation {h.get('isolation', '?')}, cgroup {h.get('cgroup', '?')}, "
            f"flags: {' '.join(self.args) or '(defaults)'}."
        )

    def stop_note(self) -> str:
        """One line for the report: how the daemon stopped and whether anything leaked."""
        if self.stop_seconds is None:
            return f"{self.label}: not stopped cleanly"
        leak = (
            f"LEAKED {len(self.leaked_pids)} instance process(es): {self.leaked_pids}"
            if self.leaked_pids
            else "no instance process left behind"
        )
        if self.leftovers:
            leak += f"; LEFT BEHIND: {self.leftovers.describe()}"
        return (
            f"{self.label} stopped on SIGTERM in {self.stop_seconds * 1000:.0f} ms; "
            f"{self.checked_processes} instance process(es) checked, {leak}."
        )
