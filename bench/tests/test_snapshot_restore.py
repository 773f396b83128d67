"""snapshot-restore's analysis, schedule, file handling and rendering, without a daemon.

The samples are shaped as run.measure_one writes them; their numbers are of the order seen
on the 2-core development machine (a Python function with a 50 MiB init state: lazy restores
copy all of it, FaaSnap's loader only the loading set)."""

from __future__ import annotations

import json
import os

import pytest
from icebox_bench.recipes import get as get_recipe
from icebox_bench.snapshot_eval import analysis, functions, locate, pagecache, render
from icebox_bench.snapshot_eval.run import START, action_name, invocation_line, schedule, subject_body

MIB = 1 << 20


def sample(
    mode: str,
    variant: str,
    latency: float,
    *,
    uss_mib: float = 60.0,
    init: int = 50,
    duration: int = 5,
    resident: int = 0,
    pages: int = 1000,
    pager: dict | None = None,
    function: str = "web_server",
) -> dict:
    s = {
        "function": function,
        "mode": mode,
        "variant": variant,
        "status": "success",
        "start_kind": "cold",
        "restore": None if mode == START else mode,
        "instance": f"sr-{function}-{mode}-x",
        "latency_ms": latency,
        "init_ms": init,
        "duration_ms": duration,
        "wait_ms": init + 1,
        "uss": uss_mib * MIB,
        "pss": uss_mib * MIB,
        "rss": (uss_mib + 10) * MIB,
        "round": 0,
    }
    if mode != START:
        s.update(
            resident_pages=resident,
            snapshot_pages=pages,
            restore_stats={
                "mode": mode,
                "restore_ms": init,
                "criu_ms": init - 10,
                **({"pager": pager} if pager else {}),
            },
        )
    return s


def web_server_samples() -> list[dict]:
    out = []
    for lat in (270.0, 280.0, 300.0):
        out.append(sample("lazy", "cold", lat, uss_mib=112))
    for lat in (250.0, 255.0, 262.0):
        out.append(sample("lazy", "cached", lat, uss_mib=112, resident=1000))
    pager = {
        "faults": 466,
        "fault_pages": 500,
        "zero_pages": 20,
        "loader_pages": 8296,
        "bytes_read": 36 * MIB,
        "loader_ms": 34.0,
        "pending_pages": 20462,
    }
    for lat in (89.0, 95.0, 120.0):
        out.append(sample("faasnap", "cold", lat, uss_mib=40, pager=pager))
    for lat in (70.0, 74.0, 80.0):
        out.append(sample("faasnap", "cached", lat, uss_mib=40, resident=1000, pager=pager))
    for lat in (200.0, 205.0, 210.0):
        out.append(sample(START, "-", lat, uss_mib=80, init=150))
    return out


def test_cell_takes_medians_and_the_resident_share():
    c = analysis.cell(
        [
            sample("faasnap", "cached", 70.0, resident=1000, init=40),
            sample("faasnap", "cached", 80.0, resident=990, init=44),
            sample("faasnap", "cached", 74.0, resident=980, init=50),
        ]
    )
    assert c["n"] == 3
    assert c["latency_ms"] == {"p50": 74.0, "min": 70.0, "max": 80.0}
    assert c["restore_ms"] == 44.0 and c["criu_ms"] == 34.0
    assert c["resident"] == pytest.approx(0.99)
    assert c["uss_mib"] == 60.0
    assert c["pager"] is None  # no pager in these samples (eager and lazy have none)


def test_pager_medians_come_from_restore_stats():
    p = {
        "faults": 10,
        "fault_pages": 12,
        "zero_pages": 2,
        "loader_pages": 100,
        "bytes_read": 4096,
        "loader_ms": 3.0,
        "pending_pages": 5,
    }
    c = analysis.cell(
        [sample("faasnap", "cold", 50.0, pager=p), sample("faasnap", "cold", 52.0, pager={**p, "faults": 30})]
    )
    assert c["pager"]["faults"] == 20.0 and c["pager"]["loader_pages"] == 100.0


def test_ratios_and_targets_of_a_large_working_set_function():
    f = analysis.function_summary(web_server_samples())
    assert f["faasnap_speedup_over_lazy"]["cold"] == pytest.approx(280.0 / 95.0, abs=1e-3)
    assert f["faasnap_speedup_over_lazy"]["cached"] == pytest.approx(255.0 / 74.0, abs=1e-3)
    assert f["faasnap_vs_cached"]["faasnap"] == pytest.approx(95.0 / 74.0, abs=1e-3)
    assert f["faasnap_vs_cached"]["lazy"] == pytest.approx(95.0 / 255.0, abs=1e-3)
    assert f["start_over_restore"]["faasnap"] == pytest.approx(205.0 / 95.0, abs=1e-3)
    assert f["uss_vs_start"]["lazy"]["cold"] == pytest.approx(112 / 80, abs=1e-3)
    assert f["uss_vs_start"]["faasnap"]["cold"] == pytest.approx(40 / 80, abs=1e-3)
    [t] = analysis.targets({"web_server": f})
    assert t["met"] and t["function"] == "web_server"


def test_target_missed_when_faasnap_gains_little():
    samples = [
        sample("lazy", "cold", 50.0, function="hello"),
        sample("faasnap", "cold", 45.0, function="hello"),
        sample(START, "-", 80.0, function="hello"),
    ]
    s = analysis.summary({"repetitions": 1}, {"hello": samples})
    [t] = s["targets"]
    assert not t["met"] and t["value"] == pytest.approx(50 / 45, abs=1e-3)
    json.dumps(s)


def test_no_target_without_both_modes_and_failures_kept():
    s = analysis.summary({}, {"hello": [sample("eager", "cold", 50.0)], "broken": []}, failed={"broken": "why"})
    assert s["targets"] == [] and list(s["functions"]) == ["hello"] and s["failed"] == {"broken": "why"}
    f = s["functions"]["hello"]
    assert f["faasnap_speedup_over_lazy"] == {"cold": None, "cached": None}
    assert f["start_over_restore"] == {"eager": None} and f["uss_vs_start"] == {"eager": {"cold": None}}


def test_schedule_rotates_every_cell_once_per_round():
    rounds = schedule(["lazy", "faasnap"], ["cold", "cached"], 3)
    assert len(rounds) == 3
    for order in rounds:
        assert sorted(order) == sorted(
            [("lazy", "cold"), ("lazy", "cached"), ("faasnap", "cold"), ("faasnap", "cached"), (START, "-")]
        )
    assert rounds[0][0] == ("lazy", "cold") and rounds[1][0] == ("lazy", "cached")
    assert rounds[1][-1] == ("lazy", "cold")


def test_actions_name_their_mode_in_annotations(tmp_path):
    code = tmp_path / "f.py"
    code.write_text("def main(a):\n    return a\n")
    spec = functions.manifest.FunctionSpec("f", "python", "python:3", code, main="main", memory_mb=256)
    body = subject_body(spec, "reap")
    assert {"key": "icebox.snapshot", "value": True} in body["annotations"]
    assert {"key": "icebox.snapshot_restore", "value": "reap"} in body["annotations"]
    assert body["limits"] == {"memory": 256}
    assert "annotations" not in subject_body(spec, START)
    assert action_name("f", "reap") == "sr-f-reap"


def test_invocation_line_keeps_the_record_fields():
    line = invocation_line(sample("faasnap", "cold", 90.0), "test")
    assert line["phase"] == "test" and line["iteration"] == 0 and line["restore"] == "faasnap"
    assert "restore_stats" not in line and "uss" not in line


def test_examples_and_manifest_functions_are_selected_in_order():
    specs = functions.select("nodejs-hello,hello,read-part", None)
    assert [s.name for s in specs] == ["nodejs-hello", "hello", "read-part"]
    assert specs[0].input("B") == {"name": "icebox benchmark B"}
    assert specs[2].path.is_file() and specs[2].input("A")["blocks"] < specs[2].input("B")["blocks"]
    with pytest.raises(functions.manifest.ManifestError):
        functions.select("no-such-function", None)


def test_snapshot_dir_from_the_restore_or_the_state_dir(tmp_path):
    snap = tmp_path / "snapshots" / "guest_sr-a-8f00aa11" / "process-0.0.2"
    (snap / "image").mkdir(parents=True)
    (snap / "entry.json").write_text(json.dumps({"action": "guest/sr-a", "version": "0.0.2"}))
    building = tmp_path / "snapshots" / "guest_sr-a-8f00aa11" / ".building-1"
    building.mkdir()
    (building / "entry.json").write_text(json.dumps({"action": "guest/sr-a", "version": "0.0.3"}))
    stats = {"mode": "record", "snapshot": str(snap / "image")}
    assert locate.snapshot_dir(stats, "guest/sr-a", "0.0.2", None) == snap
    with pytest.raises(locate.LocateError, match="not version 0.0.3"):
        locate.snapshot_dir(stats, "guest/sr-a", "0.0.3", None)
    with pytest.raises(locate.LocateError, match="not a snapshot on this machine"):
        locate.snapshot_dir({"snapshot": str(tmp_path / "elsewhere" / "image")}, "guest/sr-a", "0.0.2", None)
    # A daemon that does not name it: searched under --state-dir (never in a build in progress).
    assert locate.snapshot_dir({"mode": "lazy"}, "guest/sr-a", "0.0.2", tmp_path) == snap
    with pytest.raises(locate.LocateError):
        locate.snapshot_dir(None, "guest/sr-a", "0.0.3", tmp_path)
    with pytest.raises(locate.LocateError, match="--state-dir"):
        locate.snapshot_dir(None, "guest/sr-a", "0.0.2", None)


def test_page_cache_drop_and_load_of_these_files_only(tmp_path):
    d = tmp_path / "snap"
    (d / "criu").mkdir(parents=True)
    (d / "criu" / "pages-1.img").write_bytes(os.urandom(2 * MIB))
    (d / "loadset.img").write_bytes(os.urandom(MIB))
    (d / "empty").write_bytes(b"")
    other = tmp_path / "other.bin"
    other.write_bytes(os.urandom(MIB))
    files = pagecache.files_under(d)
    assert [f.name for f in files] == ["empty", "loadset.img", "pages-1.img"]
    pages = 3 * MIB // os.sysconf("SC_PAGE_SIZE")
    pagecache.drop(files)
    cached, total = pagecache.resident(files)
    if cached == total:
        pytest.skip("this filesystem keeps its files in memory (tmpfs): nothing to drop")
    assert total == pages and cached == 0
    assert pagecache.resident([other]) == (MIB // os.sysconf("SC_PAGE_SIZE"),) * 2  # untouched
    assert pagecache.load(files) == 3 * MIB
    assert pagecache.resident(files) == (pages, pages)


def test_render_writes_the_tables_and_the_plot(tmp_path):
    s = analysis.summary(
        {"repetitions": 3},
        {"web_server": web_server_samples()},
        {"web_server": {"faasnap": {"disk_bytes": 60 * MIB, "loading_set": {"loading_set_pages": 9000}}}},
    )
    files = render.render(tmp_path, s)
    assert [f.name for f in files] == ["snapshot-restore.md", "snapshot_restore.png"]
    text = files[0].read_text()
    assert "| web_server | faasnap | cold | 3 | 95.0 |" in text
    assert "2.95×" in text and "| met |" in text


def test_recipe_is_registered_with_its_defaults():
    recipe = get_recipe("snapshot-restore")
    config = recipe.load_config()
    assert "--prewarm" in recipe.daemon_args(config)
    defaults = config["defaults"]
    assert defaults["repetitions"] >= 5
    assert set(defaults["modes"].split(",")) == {"eager", "lazy", "reap", "faasnap"}
    for name in (
        "read-part",
        "web_server",
        "hello",
        "nodejs-hello",
        "java-hello",
        "json_dumps_loads",
        "pyaes",
        "image_processing",
        "chameleon",
    ):
        assert name in defaults["functions"].split(",")
