"""faasmem-semiwarm: the burst / idle / wake pattern, and a recorded run analysed and rendered."""

from __future__ import annotations

import json

import pytest
from faasmem_samples import T0, _jsonl, instance_row
from icebox_bench.faasmem_eval import semiwarm, semiwarm_render


def test_the_pattern_is_bursts_idle_times_and_wake_requests():
    s = semiwarm.pattern("web_server", 3, 2.0, 60.0, 2)
    assert [(i.offset_s, i.trace_function) for i in s.items] == [
        (0.0, "burst"),
        (2.0, "burst"),
        (4.0, "burst"),
        (64.0, "wake"),
        (66.0, "burst"),
        (68.0, "burst"),
        (128.0, "wake"),
    ]
    assert {i.function for i in s.items} == {"web_server"} and [i.seq for i in s.items] == list(range(7))
    with pytest.raises(ValueError):
        semiwarm.pattern("f", 0, 1.0, 10.0, 1)
    assert semiwarm.variant_label("1%/s") == "1pct-per-s" and semiwarm.variant_label("off") == "off"


def _write(path, *, on: bool):
    """Burst at 0, 2, 4 s (answers 50 ms later, the first cold); wake at 64 s. Local memory 80
    MiB after the burst; semi-warm (when on) from 30 s, 1 MiB/s down to 47 MiB at 63 s."""
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "result.json").write_text(json.dumps({"window_ms": [T0, T0 + 70_000.0]}))
    records = []
    for seq, (offset, role) in enumerate([(0, "burst"), (2, "burst"), (4, "burst"), (64, "wake")]):
        start = T0 + offset * 1000.0
        latency = 900.0 if seq == 0 else (70.0 if on and role == "wake" else 50.0)
        records.append(
            {
                "seq": seq,
                "function": "web",
                "trace_function": role,
                "warmup": False,
                "scheduled_ms": start,
                "start_ms": start,
                "end_ms": start + latency,
                "latency_ms": latency,
                "status": "success",
                "start_kind": "cold" if seq == 0 else "warm",
            }
        )
    _jsonl(path / "invocations.jsonl", records)
    samples = []
    for t in range(0, 70):
        local = 80 - (max(0, min(t, 63) - 30) if on else 0) if t < 64 else 60
        samples.append(
            {"t_ms": T0 + t * 1000.0 + 500.0, "instances": [instance_row("web", local, semiwarm=on and 30 <= t < 64)]}
        )
    _jsonl(path / "memory.jsonl", samples)
    events = [{"time_ms": T0 + 2_000.0, "kind": "offloaded", "action": "guest/web", "detail": "runtime 5 MiB in 2 ms"}]
    if on:
        events += [
            {
                "time_ms": T0 + 50_000.0,
                "kind": "offloaded",
                "action": "guest/web",
                "detail": "semiwarm 33 MiB in 10 ms",
            },
            {"time_ms": T0 + 64_500.0, "kind": "refaulted", "action": "guest/web", "detail": "3 MiB"},
        ]
    _jsonl(path / "events.jsonl", events)
    return path


@pytest.fixture
def summary(tmp_path) -> dict:
    variants = {
        name: semiwarm.analyse_run(_write(tmp_path / semiwarm.variant_label(name), on=name != "off"), "web")
        for name in ("1%/s", "off")
    }
    config = {
        "function": "web",
        "burst": 3,
        "gap_s": 2.0,
        "idle_s": 60.0,
        "cycles": 1,
        "keep_alive_s": 600.0,
        "variants": list(variants),
        "daemon_args": ["--semiwarm", "VARIANT"],
        "failed": {},
    }
    return json.loads(json.dumps(semiwarm.summary(config, variants)))


def test_an_idle_period_shows_when_semiwarm_began_what_it_offloaded_and_what_the_wake_request_cost(summary):
    [on] = summary["variants"]["1%/s"]["periods"]
    assert on["idle_s"] == pytest.approx(59.95)
    assert on["local_after_burst_mib"] == 80.0 and on["local_before_wake_mib"] == 47.0 and on["local_min_mib"] == 47.0
    assert on["semiwarm_after_s"] == pytest.approx(30.5 - 4.05)
    assert on["offloaded_idle_mib"] == 33.0
    assert on["wake"] == {"latency_ms": 70.0, "start_kind": "warm", "status": "success", "refaulted_mib": 3.0}
    [off] = summary["variants"]["off"]["periods"]
    assert off["semiwarm_after_s"] is None and off["local_mean_mib"] == 80.0 and off["wake"]["refaulted_mib"] == 0.0
    assert summary["variants"]["1%/s"]["burst_warm_latency_ms"] == {"p50": 50.0, "max": 50.0}
    assert summary["variants"]["1%/s"]["offloaded_mib"] == 38.0
    cmp = summary["comparison"]["1%/s"]
    assert cmp["wake_latency_ratio"] == [1.4] and cmp["idle_local_mean_ratio"][0] < 0.9


def test_the_timeline_holds_every_sample_with_its_semiwarm_flag(summary):
    timeline = summary["variants"]["1%/s"]["timeline"]
    assert len(timeline) == 70 and timeline[0] == [0.5, 80.0, False] and timeline[40] == [40.5, 70.0, True]
    assert summary["variants"]["1%/s"]["wakes"] == [{"offset_s": 64.0, "latency_ms": 70.0}]


def test_render_writes_the_table_and_the_timeline(tmp_path, summary):
    files = semiwarm_render.render(tmp_path, summary)
    assert [f.name for f in files] == ["faasmem-semiwarm.md", "semiwarm_timeline.png"]
    assert files[1].stat().st_size > 10_000
    text = files[0].read_text()
    assert "| 1%/s | 1 | 60.0 | 80.0 |" in text and "| off | 1 |" in text and "## Overheads" in text
    assert semiwarm_render.render(tmp_path, {**summary, "variants": {}}) == []
