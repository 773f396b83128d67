"""squeezy-fig5's analysis (squeezy_eval/fig5.py), tables and the example's arguments."""

from __future__ import annotations

import json
import math

import pytest
from icebox_bench.recipes.squeezy_fig5 import example_args
from icebox_bench.squeezy_eval import fig5, fig5_render


def line(
    series: str,
    size: int,
    live: int,
    unplug: float,
    *,
    migrated: int = 0,
    outcome: str = "released",
    partitions: int = 4,
) -> dict:
    mode, zeroing = fig5.SERIES[series]
    return {
        "series": series,
        "mode": mode,
        "size_mib": size,
        "partitions": partitions,
        "live_neighbours": live,
        "fullness": (live + 1) / partitions,
        "repetition": 0,
        "fill_mib": int(size * 0.8),
        "fill_s": 3.0,
        "destroy_ms": unplug + 50,
        "block_mib": 2,
        "guest_zeroing": zeroing if zeroing is not None else mode != "squeezy",
        "accel": "Tcg",
        "report": {
            "unplug_ms": unplug,
            "drain_ms": 5.0,
            "stop_ms": 20.0,
            "pages_migrated": migrated,
            "migrate_failures": 0,
            "residue_bytes": 0,
            "outcome": outcome,
            "neighbours": live,
        },
    }


def samples() -> list[dict]:
    out = []
    for size, base in ((512, 100.0), (2048, 300.0)):
        for live in range(4):
            out.append(line("squeezy", size, live, base))
            # Vanilla slows down as the VM fills: 4x at 1/4 full .. 10x full.
            out.append(line("virtio-mem", size, live, base * (4 + 2 * live), migrated=1000 * live))
            out.append(line("virtio-mem-nozero", size, live, base * (3 + 1.5 * live), migrated=1000 * live))
            out.append(line("balloon", size, live, base * 8))
    return out


def test_series_from_tag_or_mode_and_zeroing():
    assert fig5.series_of({"series": "balloon", "mode": "virtio-mem"}) == "balloon"
    assert fig5.series_of({"mode": "virtio-mem", "guest_zeroing": False}) == "virtio-mem-nozero"
    assert fig5.series_of({"mode": "virtio-mem", "guest_zeroing": True}) == "virtio-mem"
    assert fig5.series_of({"mode": "squeezy", "guest_zeroing": False}) == "squeezy"


def test_ratios_per_size_and_overall():
    s = fig5.summary(samples(), sizes=[512, 2048], series=list(fig5.SERIES), partitions=4, fill=0.8, accel="auto")
    r = s["per_size"]["512"]["ratios"]["virtio-mem"]
    assert r["by_fullness"] == {"0.25": 4.0, "0.5": 6.0, "0.75": 8.0, "1": 10.0}
    assert r["mean"] == pytest.approx(7.0) and r["at_full"] == pytest.approx(10.0) and r["full"] == "1"
    assert s["per_size"]["2048"]["ratios"]["balloon"]["mean"] == pytest.approx(8.0)
    assert s["overall"]["virtio-mem"]["at_full"] == pytest.approx(10.0)
    # Zeroing is (10 - 7.5) / 10 of vanilla's unplug at full VM.
    assert s["per_size"]["512"]["zeroing_share"] == pytest.approx(0.25)
    assert s["cells"]["virtio-mem"]["2048"]["1"]["pages_migrated"] == 3000
    assert s["squeezy_pages_migrated"] == 0
    assert [t["met"] for t in s["targets"]] == [True, True, True]
    # The lines' accelerator wins over the setting, and brings the note.
    assert s["accel"] == "tcg" and "TCG" in s["note"]
    json.dumps(s)


def test_targets_missed_and_failures_kept():
    data = [x for x in samples() if x["size_mib"] == 512]
    data = [
        line("squeezy", 512, 3, 100.0, migrated=12) if (x["series"], x["live_neighbours"]) == ("squeezy", 3) else x
        for x in data
    ]
    data.append({"series": "balloon", "mode": "balloon", "size_mib": 2048, "error": "no reclaim report"})
    s = fig5.summary(data, sizes=[512, 2048], series=list(fig5.SERIES), partitions=4, fill=0.8, accel="kvm")
    assert s["squeezy_pages_migrated"] == 12
    assert not s["targets"][2]["met"]
    assert s["failed"] == {"balloon 2048 MiB": "no reclaim report"}
    assert s["per_size"]["2048"]["ratios"]["balloon"]["mean"] is None
    assert s["overall"]["balloon"]["at_full"] == pytest.approx(8.0)
    only = fig5.summary(data, sizes=[512], series=["squeezy", "virtio-mem"], partitions=4, fill=0.8, accel="kvm")
    assert [t["target"].split(" than ")[-1][:10] for t in only["targets"][:-1]] == ["virtio-mem"]


def test_timed_out_unplugs_are_not_latencies():
    c = fig5.cell([line("virtio-mem", 512, 3, 900.0), line("virtio-mem", 512, 3, 30000.0, outcome="timed_out")])
    assert c["unplug_ms"] == 900.0 and c["n"] == 1 and c["not_released"] == {"timed_out": 1}


def test_geomean():
    assert fig5.geomean([2.0, 8.0, None]) == pytest.approx(4.0)
    assert fig5.geomean([None]) is None
    assert math.isclose(fig5.geomean([3.0]), 3.0)


def test_example_args_per_series():
    s = {"sizes": [256], "partitions": 2, "fill": 0.8, "repetitions": 1, "accel": "auto", "block_mib": 0}
    assert example_args("squeezy", s) == [
        "--modes",
        "squeezy",
        "--sizes",
        "256",
        "--partitions",
        "2",
        "--fill",
        "0.8",
        "--repetitions",
        "1",
        "--accel",
        "auto",
    ]
    assert example_args("virtio-mem-nozero", s)[-2:] == ["--guest-zeroing", "off"]
    assert "--block-mib" in example_args("balloon", {**s, "block_mib": 4})


def test_render(tmp_path):
    s = fig5.summary(samples(), sizes=[512, 2048], series=list(fig5.SERIES), partitions=4, fill=0.8, accel="tcg")
    files = fig5_render.render(tmp_path, json.loads(json.dumps(s)))
    text = files[0].read_text()
    assert "virtio-mem, no zeroing" in text and "10.0x" in text and "617" in text
    assert files[1].stat().st_size > 0
