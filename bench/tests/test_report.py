"""The report on a synthetic run directory with known numbers."""

from __future__ import annotations

import json

import pytest
from icebox_bench.report import compute, load_run, write_report
from icebox_bench.units import GIB, MIB

T0 = 1_700_000_000_000.0  # ms


def _inv(seq, offset_s, latency_ms, kind, status="success", function="f", warmup=False):
    start = T0 + offset_s * 1000.0
    return {
        "seq": seq,
        "function": function,
        "warmup": warmup,
        "scheduled_ms": start,
        "start_ms": start,
        "end_ms": start + latency_ms,
        "latency_ms": latency_ms,
        "start_kind": kind,
        "status": status,
        "lag_ms": 0.5,
    }


def _sample(t_s, rows):
    return {
        "t_ms": T0 + t_s * 1000.0,
        "instances": [
            {"id": i, "state": state, "uss": uss, "pss": uss, "rss": uss, "swap": 0}
            for i, (state, uss) in enumerate(rows)
        ],
    }


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "baseline"
    d.mkdir()
    invocations = [
        _inv(0, -5.0, 999.0, "cold", warmup=True),  # warm-up: ignored everywhere
        _inv(1, 0.0, 100.0, "cold"),
        _inv(2, 1.0, 10.0, "warm"),
        _inv(3, 2.0, 20.0, "warm", function="g"),
        _inv(4, 3.0, 30.0, "warm"),
        _inv(5, 9.9, 5.0, None, status="rejected"),
    ]
    (d / "invocations.jsonl").write_text("\n".join(json.dumps(r) for r in invocations) + '\n{"torn')
    samples = [
        _sample(0.0, [("running", 100 * MIB)]),
        _sample(5.0, [("idle", 200 * MIB), ("frozen", 100 * MIB)]),
    ]
    (d / "memory.jsonl").write_text("\n".join(json.dumps(s) for s in samples) + "\n")
    (d / "config.json").write_text(json.dumps({"command": "icebox-bench replay ..."}))
    return d


def test_metrics(run_dir):
    m = compute(load_run(run_dir))
    assert m.invocations == 5 and m.successes == 4
    assert m.statuses == {"success": 4, "rejected": 1}
    # latencies 10, 20, 30, 100: p50 = 25, p90 = 30 + 0.7 * 70 = 79
    assert m.latency_ms["p50"] == pytest.approx(25.0)
    assert m.latency_ms["p90"] == pytest.approx(79.0)
    assert m.cold_starts == 1 and m.cold_start_rate == pytest.approx(0.25)
    # window: first scheduled (offset 0) to last end (9.9 s + 5 ms)
    assert m.window_s == pytest.approx(9.905)
    assert m.throughput_per_s == pytest.approx(4 / 9.905)
    assert m.memory_mean_mib == pytest.approx(200.0) and m.memory_peak_mib == pytest.approx(300.0)
    # idle + frozen: 0 for 5 s, then 300 MiB until 9.905 s
    assert m.idle_gib_s == pytest.approx(300 * MIB * 4.905 / GIB)
    assert [f.function for f in m.functions] == ["f", "g"]


def test_write_report_side_by_side(run_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "invocations.jsonl").write_text(json.dumps(_inv(0, 0.0, 50.0, "cold")) + "\n")
    markdown, files = write_report([run_dir, other], tmp_path / "out")
    header = next(line for line in markdown.splitlines() if line.startswith("| metric"))
    assert header == "| metric | baseline | other |"
    assert "| p50 latency (ms) | 25.0 | 50.0 |" in markdown
    assert "| cold-start rate | 25.0 % | 100.0 % |" in markdown
    names = {f.name for f in files}
    assert {"report.md", "metrics.json", "latency_cdf.png", "memory_timeline.png", "cold_starts.png"} == names
    for f in files:
        if f.suffix == ".png":
            assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())[0]["label"] == "baseline"


def test_not_a_run_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path)
