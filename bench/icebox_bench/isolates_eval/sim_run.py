"""Running icebox-sim (crates/icebox-sim, ISOLATES_SPEC §6) on sim-validate's events and
reading what it wrote."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

from .. import paths
from .sim_validate import step_mean


def sim_binary() -> Path:
    return paths.bin_dir() / "icebox-sim"


def sim_argv(binary: Path, events_csv: Path, profiles: Path, out: Path, *, node_memory: str, keepalive_s: float,
             sharing: str, concurrency: int, technique: str = "none") -> list[str]:
    return [str(binary), "--trace", f"events:{events_csv}", "--profiles", str(profiles),
            "--mapping", "round-robin", "--nodes", "1", "--node-memory", node_memory,
            "--keepalive", f"ttl:{keepalive_s:g}s", "--sharing", sharing, "--concurrency", str(concurrency),
            "--technique", technique, "--out", str(out)]


def run_sim(argv: list[str], log_path: Path, timeout_s: float = 600.0) -> float:
    """Run it; the wall seconds it took. Raises RuntimeError (with its log's end) if it fails."""
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
    if code != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"icebox-sim exited with {code}:\n{tail}")
    return time.monotonic() - t0


def _find(d: dict, *names: str):
    """The first of `names` found in `d` or one level down (summary layouts differ)."""
    for name in names:
        if name in d:
            return d[name]
    for value in d.values():
        if isinstance(value, dict):
            for name in names:
                if name in value:
                    return value[name]
    return None


def _mb(value, key: str) -> float | None:
    if value is None:
        return None
    return float(value) / (1024 * 1024) if "bytes" in key else float(value)


def timeline_memory(path: Path) -> list[tuple[float, float]]:
    """(t ms, memory MiB) from timeline.csv: a time column in s or ms, a memory column in MB/MiB
    or bytes."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    cols = list(rows[0])
    tcol = next((c for c in cols if c.split("_")[0] in ("t", "time", "second", "seconds")), cols[0])
    mcol = next((c for c in cols if c.startswith("memory") and "active" not in c), None)
    if mcol is None:
        raise ValueError(f"{path}: no memory column in {cols}")
    t_scale = 1.0 if tcol.endswith("ms") else 1000.0
    out = []
    for r in rows:
        out.append((float(r[tcol]) * t_scale, _mb(r[mcol], mcol)))
    return out


def read_sim(out: Path, horizon_ms: float) -> dict:
    """{"cold_starts", "avg_memory_mb", "events_per_s", "summary"} from the simulator's --out DIR."""
    top = json.loads((out / "summary.json").read_text())
    summary = top["runs"][0] if isinstance(top.get("runs"), list) and top["runs"] else top
    cold = _find(summary, "cold_starts", "cold_start_count")
    avg = None
    timeline = out / "timeline.csv"
    if timeline.is_file():
        avg = step_mean(timeline_memory(timeline), 0.0, horizon_ms)
    if avg is None:
        for key in ("avg_memory_mb", "average_memory_mb", "mean_memory_mb", "avg_memory_bytes", "average_memory_bytes"):
            value = _find(summary, key)
            if value is not None:
                avg = _mb(value, key)
                break
    return {"cold_starts": cold, "avg_memory_mb": round(avg, 3) if avg is not None else None,
            "events_per_s": _find(top, "events_per_s", "events_per_second"), "summary": top}
