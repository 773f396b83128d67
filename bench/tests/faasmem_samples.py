"""Run directories shaped like a FaaSMem daemon's answers (the interfaces in the FaaSMem spec):
memory.jsonl with instances' `offload`, events with `offloaded` / `refaulted`, offload.jsonl with
the Prometheus families and the kernel's swap, cpu.jsonl. Numbers are chosen so every figure
can be checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

from icebox_bench.units import MIB

T0 = 1_700_000_000_000.0  # ms
BUCKETS = (0.001, 0.005, 0.01, 0.05, float("inf"))


def _jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def instance_row(
    function: str,
    local_mib: float,
    *,
    offloaded_mib: float = 0.0,
    refaulted_mib: float = 0.0,
    semiwarm: bool = False,
    ident: str | None = None,
) -> dict:
    return {
        "id": ident or f"{function}-1",
        "action": f"guest/{function}",
        "state": "frozen",
        "uss": int(local_mib * MIB) + 7 * MIB,
        "pss": 0,
        "rss": 0,
        "swap": 0,
        "cgroup": 0,
        "charged": 0,
        "invocations": 1,
        "measured_at_ms": None,
        "offload": {
            "mode": "faasmem",
            "local_bytes": int(local_mib * MIB),
            "offloaded_bytes": int(offloaded_mib * MIB),
            "refaulted_bytes": int(refaulted_mib * MIB),
            "segments": {"runtime": 0, "init": 0, "execution": 0, "hot": 0},
            "request_window": None,
            "semiwarm": semiwarm,
        },
    }


def histogram(name: str, label: str, values: dict[str, list[float]]) -> list[list]:
    """Prometheus samples of a histogram: {label value: observations (s)}."""
    out = []
    for key, observed in values.items():
        for le in BUCKETS:
            out.append(
                [
                    f"{name}_bucket",
                    {label: key, "le": "+Inf" if le == float("inf") else f"{le:g}"},
                    float(sum(1 for v in observed if v <= le)),
                ]
            )
        out.append([f"{name}_sum", {label: key}, float(sum(observed))])
        out.append([f"{name}_count", {label: key}, float(len(observed))])
    return out


def offload_sample(
    t_ms: float,
    *,
    offloaded: dict[str, float],
    refaulted: float,
    barriers: dict,
    steps: dict,
    swap_used_kib: int,
    pswpout: int,
) -> dict:
    metrics = [["icebox_offloaded_bytes_total", {"step": s}, v] for s, v in offloaded.items()]
    metrics += [["icebox_refaulted_bytes_total", {}, refaulted]]
    metrics += histogram("icebox_offload_barrier_seconds", "barrier", barriers)
    metrics += histogram("icebox_offload_step_seconds", "step", steps)
    return {
        "t_ms": t_ms,
        "metrics": metrics,
        "swaps": [
            {
                "device": "/dev/zram1",
                "type": "partition",
                "size_bytes": 4 << 30,
                "used_bytes": swap_used_kib * 1024,
                "priority": 32767,
            }
        ],
        "vmstat": {"pswpin": 10, "pswpout": pswpout},
    }


def write_run(
    path: Path,
    *,
    local_mib: dict[str, float],
    latency_ms: dict[str, list[float]],
    offloaded_mib: dict[str, float] | None = None,
    node_offloaded_mib: float = 0.0,
    refaulted_mib: float = 0.0,
    window_s: float = 100.0,
) -> Path:
    """A fig12 run: each function's local memory constant over the window (samples every 10 s),
    its invocations spread over the window, `offloaded_mib` per function as `offloaded` events,
    the node's counters rising by node_offloaded_mib / refaulted_mib over the window."""
    path.mkdir(parents=True)
    end = T0 + window_s * 1000.0
    (path / "config.json").write_text("{}")
    (path / "result.json").write_text(json.dumps({"window_ms": [T0, end]}))
    samples = [
        {
            "t_ms": T0 + k * 10_000.0,
            "instances": [instance_row(f, m) for f, m in local_mib.items()],
            "local": int(sum(local_mib.values()) * MIB),
            "pool": {"kind": "zram", "stored_bytes": 8 * MIB, "memory_bytes": 2 * MIB},
        }
        for k in range(int(window_s // 10))
    ]
    _jsonl(path / "memory.jsonl", samples)
    invocations, seq = [], 0
    for f, latencies in latency_ms.items():
        for i, lat in enumerate(latencies):
            start = T0 + 1000.0 * (1 + i)
            invocations.append(
                {
                    "seq": seq,
                    "function": f,
                    "trace_function": "t",
                    "warmup": False,
                    "scheduled_ms": start,
                    "start_ms": start,
                    "end_ms": start + lat,
                    "latency_ms": lat,
                    "status": "success",
                    "start_kind": "cold" if i == 0 else "warm",
                }
            )
            seq += 1
    _jsonl(path / "invocations.jsonl", invocations)
    events = [
        {
            "seq": i,
            "time_ms": T0 + 5000.0,
            "instance": f"{f}-1",
            "action": f"guest/{f}",
            "kind": "offloaded",
            "detail": f"runtime {mib} MiB in 3 ms",
        }
        for i, (f, mib) in enumerate((offloaded_mib or {}).items())
    ]
    _jsonl(path / "events.jsonl", events)
    quiet = dict(barriers={}, steps={})
    _jsonl(
        path / "offload.jsonl",
        [
            offload_sample(
                T0 - 500.0, offloaded={"runtime": 0.0}, refaulted=0.0, swap_used_kib=0, pswpout=100, **quiet
            ),
            offload_sample(
                end - 500.0,
                offloaded={"runtime": node_offloaded_mib * MIB},
                refaulted=refaulted_mib * MIB,
                barriers={"runtime_ready": [0.002, 0.002], "init_done": [0.008]},
                steps={"rollback": [0.004]},
                swap_used_kib=1024,
                pswpout=612,
            ),
        ],
    )
    _jsonl(
        path / "cpu.jsonl",
        [
            {"t_ms": T0 + t * 1000.0, "method": "proc", "total_s": 0.5 * t, "daemon_s": 0.01 * t, "machine_s": 1.0 * t}
            for t in range(0, int(window_s) + 1, 10)
        ],
    )
    return path
