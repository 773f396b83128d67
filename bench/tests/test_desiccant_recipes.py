"""The four Desiccant recipes are registered with their config files and options, and their
building blocks shape requests as the daemon's contract says."""

from __future__ import annotations

import pytest
from icebox_bench import manifest, recipes
from icebox_bench.commands.run_cmd import recipe_parser
from icebox_bench.desiccant_eval import actions
from icebox_bench.recipes import desiccant_fig9_10
from icebox_bench.units import MIB

NAMES = ("desiccant-fig7", "desiccant-fig8", "desiccant-fig9-10", "desiccant-fig13")


@pytest.mark.parametrize("name", NAMES)
def test_registered_with_defaults_for_every_option_and_a_daemon_that_reclaims_nothing_by_itself(name, tmp_path):
    recipe = recipes.get(name)
    config = recipe.load_config()
    args = recipe_parser(recipe).parse_args(["--out", str(tmp_path / "o")])
    settings = recipe.settings(args, config)
    optional = {"function_durations", "warmup_scale"}
    assert recipe.option_names() - optional <= set(settings), "every option needs a default in the TOML file"
    flags = recipe.daemon_args(config)
    assert flags[flags.index("--reclaim-mode") + 1] == "vanilla"


@pytest.mark.parametrize("name", NAMES)
def test_no_option_shadows_one_of_the_run_command(name):
    class Bare(recipes.Recipe):
        name = "bare"

    common = set(vars(recipe_parser(Bare()).parse_args(["--out", "x"])))
    assert "daemon_args" in common
    assert not recipes.get(name).option_names() & common


def test_fig9_10_replay_daemons_get_the_short_candidate_timeout_unless_told_otherwise():
    recipe = recipes.get("desiccant-fig9-10")
    config = recipe.load_config()
    default = recipe.settings(recipe_parser(recipe).parse_args(["--out", "x"]), config)
    assert default["replay_daemon_args"] == "--reclaim-frozen-after 1s"
    given = recipe_parser(recipe).parse_args(["--out", "x", "--replay-daemon-args=--reclaim-frozen-after 10s"])
    assert recipe.settings(given, config)["replay_daemon_args"] == "--reclaim-frozen-after 10s"


def test_fig7_command_line_overrides_the_subset():
    recipe = recipes.get("desiccant-fig7")
    args = recipe_parser(recipe).parse_args(["--out", "x", "--functions", "fft", "--iterations", "5"])
    settings = recipe.settings(args, recipe.load_config())
    assert settings["functions"] == "fft" and settings["iterations"] == 5
    assert settings["input"] == "A"


def test_fig9_10_budget_is_the_scaled_paper_cache_unless_given(monkeypatch):
    monkeypatch.setattr(desiccant_fig9_10.os, "cpu_count", lambda: 2)
    assert desiccant_fig9_10.pool_memory("auto")[0] == "204MiB"
    assert desiccant_fig9_10.pool_memory("300MiB") == ("300MiB", "given")
    assert desiccant_fig9_10._floats("10, 20,30") == [10.0, 20.0, 30.0]
    with pytest.raises(ValueError):
        desiccant_fig9_10._modes("vanilla,lazy")


def test_an_action_asks_for_its_mode_and_limit(tmp_path):
    source = tmp_path / "f.js"
    source.write_text("function main() { return {}; }\n")
    spec = manifest.FunctionSpec("f", "nodejs", "nodejs:20", source, memory_mb=512)
    body = actions.mode_action_body(spec, "eager", memory_mb=256)
    assert body["annotations"] == [{"key": "icebox.reclaim", "value": "eager"}]
    assert body["limits"]["memory"] == 256
    assert "annotations" not in actions.mode_action_body(spec, None)  # the node's mode applies
    with pytest.raises(ValueError):
        actions.mode_action_body(spec, "lazy")


def test_memory_of_reads_the_instance_view():
    view = {"memory": {"uss": 5 * MIB, "pss": 6 * MIB, "rss": 9 * MIB}}
    assert actions.memory_of(view) == {"uss": 5 * MIB, "pss": 6 * MIB, "rss": 9 * MIB, "swap": 0}
    with pytest.raises(actions.ProtocolError):
        actions.check_mode({"id": "i", "reclaim_mode": "vanilla"}, "eager")
    actions.check_mode({"id": "i"}, "eager")  # an older daemon reports no mode: accepted
