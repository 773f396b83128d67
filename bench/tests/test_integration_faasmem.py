"""The FaaSMem recipes end to end against a real iceboxd with memory offloading: short
versions of both, checking that the summaries hold the documented figures. Skipped when the
built iceboxd has no --offload flag, or when not root (the zram pool needs it); the daemon
creates and removes its own zram device."""

from __future__ import annotations

import json
import os

import pytest
from icebox_bench import cli, paths
from icebox_bench.faasmem_eval import run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def offload_daemon():
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    if not run.supports_offload(run.iceboxd_help()):
        pytest.skip("this iceboxd has no --offload flag (the FaaSMem daemon is not built)")
    if os.geteuid() != 0:
        pytest.skip("the zram offload pool needs root")


def test_semiwarm_recipe_times_the_wake_request_of_each_variant(functions_dir, tmp_path):
    out = tmp_path / "sw"
    code = cli.main(
        [
            "run",
            "faasmem-semiwarm",
            "--out",
            str(out),
            "--functions-dir",
            str(functions_dir),
            "--function",
            "t-hello-py",
            "--burst",
            "3",
            "--gap",
            "1s",
            "--idle",
            "20s",
            "--keep-alive",
            "60s",
            "--tail",
            "2s",
            "--offload-pool",
            "zram:256MiB",
        ]
    )
    assert code == 0, (out / "summary.json").read_text() if (out / "summary.json").exists() else ""
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["variants"]) == {"1%/s", "off"}
    for variant in summary["variants"].values():
        [period] = variant["periods"]
        assert period["wake"]["status"] == "success" and period["wake"]["start_kind"] == "warm"
        assert period["local_after_burst_mib"] > 0 and variant["timeline"]
    assert (out / "faasmem-semiwarm.md").is_file() and (out / "semiwarm_timeline.png").is_file()


def test_fig12_recipe_compares_the_modes_of_one_load(functions_dir, tmp_path):
    out = tmp_path / "f12"
    code = cli.main(
        [
            "run",
            "faasmem-fig12",
            "--out",
            str(out),
            "--functions-dir",
            str(functions_dir),
            "--functions",
            "t-hello-py,t-square-py",
            "--trace-window",
            "0:120",
            "--speed",
            "10",
            "--loads",
            "high",
            "--tail",
            "3s",
            "--offload-pool",
            "zram:256MiB",
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0, summary["config"]["failed"]
    runs = summary["runs"]["high"]
    assert set(runs) == {"none", "tmo", "faasmem"}
    assert runs["none"]["node"]["local_mean_mib"] > 0
    assert summary["comparison"]["high"]["(node)"]["local_normalised"]["none"] == 1.0
    assert (out / "faasmem-fig12.md").is_file() and (out / "fig12.png").is_file()
