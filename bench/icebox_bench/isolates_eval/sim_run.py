"""Running icebox-sim (crates/icebox-sim, ISOLATES_SPEC §6) on sim-validate's events and
reading what it wrote."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

from .. import paths
from ..stats import step_mean


def sim_binary() -> Path:
    return paths.bin_dir() / "icebox-sim"


def sim_argv(
    binary: Path,
    events_csv: Path,
    profiles: Path,
    out: Path,
    *,
    node_memory: str,
    keepalive_s: float,
    sharing: str,
    concurrency: int,
    technique: str = "none",
    nodes: int = 1,
    placement: str | None = None,
    node_budget: str | None = None,
) -> list[str]:
    return [
        str(binary),
        "--trace",
        f"events:{events_csv}",
        "--profiles",
        str(profiles),
        "--mapping",
        "round-robin",
        "--nodes",
        str(nodes),
        *(["--placement", placement] if placement else []),
        *(["--node-budget", node_budget] if node_budget else []),
        "--node-memory",
        node_memory,
        "--keepalive",
        f"ttl:{keepalive_s:g}s",
        "--sharing",
        sharing,
        "--concurrency",
        str(concurrency),
        "--technique",
        technique,
        "--out",
        str(out),
    ]


def run_sim(argv: list[str], log_path: Path, timeout_s: float = 600.0) -> float:
    """Run it; the wall seconds it took. Raises RuntimeError (with its log's end) if it fails."""
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
    if code != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"icebox-sim exited with {code}:\n{tail}")
    return time.monotonic() - t0


def timeline_memory(path: Path) -> list[tuple[float, float]]:
    """(t ms, memory MiB) of the first run in icebox-sim's timeline.csv
    (crates/icebox-sim/src/output.rs: run,second,memory_mib,...)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    first = rows[0]["run"] if rows else None
    return [(float(r["second"]) * 1000.0, float(r["memory_mib"])) for r in rows if r["run"] == first]


def read_summary(out: Path) -> dict:
    """icebox-sim's summary.json in its --out DIR."""
    return json.loads((out / "summary.json").read_text())


def read_sim(out: Path, horizon_ms: float) -> dict:
    """{"cold_starts", "avg_memory_mb", "events_per_s", "summary"} from the simulator's --out DIR:
    the memory averaged over the same horizon as the replay's, from its timeline."""
    top = read_summary(out)
    avg = step_mean(timeline_memory(out / "timeline.csv"), 0.0, horizon_ms)
    return {
        "cold_starts": top["runs"][0]["metrics"]["cold_starts"],
        "avg_memory_mb": round(avg, 3) if avg is not None else None,
        "events_per_s": top["events_per_s"],
        "summary": top,
    }
