"""`icebox-bench run frozen-garbage` end to end, with its own iceboxd and two tiny functions."""

from __future__ import annotations

import json

import pytest
from icebox_bench import cli, paths
from icebox_bench.recorder import read_jsonl

pytestmark = pytest.mark.integration


def test_frozen_garbage_recipe_writes_the_documented_summary(functions_dir, tmp_path):
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    out = tmp_path / "fg"
    code = cli.main(
        [
            "run",
            "frozen-garbage",
            "--out",
            str(out),
            "--functions-dir",
            str(functions_dir),
            "--functions",
            "t-hello-py,t-hello-js",
            "--iterations",
            "3",
        ]
    )
    assert code == 0, (out / "iceboxd.log").read_text()[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"functions", "by_language"}
    assert set(summary["functions"]) == {"t-hello-py", "t-hello-js"}
    for entry in summary["functions"].values():
        assert set(entry) == {"language", "avg_ratio", "max_ratio", "uss_mb", "ideal_mb"}
        assert len(entry["uss_mb"]) == len(entry["ideal_mb"]) == 3
        ratios = [u / i for u, i in zip(entry["uss_mb"], entry["ideal_mb"], strict=True)]
        assert entry["max_ratio"] == pytest.approx(max(ratios), rel=1e-3)
        assert entry["avg_ratio"] == pytest.approx(sum(ratios) / 3, rel=1e-3)
        assert 0 < entry["avg_ratio"] <= entry["max_ratio"]
    assert summary["by_language"]["python"]["functions"] == 1
    assert summary["by_language"]["nodejs"]["max_ratio"] == summary["functions"]["t-hello-js"]["max_ratio"]

    # The measured instance ran every invocation; the ideal one was a different instance.
    details = json.loads((out / "details.json").read_text())["functions"]["t-hello-py"]
    assert details["instances"]["real"] != details["instances"]["ideal"]
    real = [r for r in read_jsonl(out / "exits.jsonl") if r["function"] == "t-hello-py" and r["phase"] == "real"]
    assert [r["iteration"] for r in real] == [1, 2, 3] and {r["instance"] for r in real} == {
        details["instances"]["real"]
    }
    for f in ("frozen-garbage.md", "ratios.png", "memory_curves.png", "config.json", "result.json"):
        assert (out / f).is_file(), f
