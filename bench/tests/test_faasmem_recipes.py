"""The FaaSMem recipes are registered with a default for every option, show --help, and refuse
to start where they cannot work (no --offload in iceboxd, a zram pool without root)."""

from __future__ import annotations

import pytest
from icebox_bench import cli, recipes
from icebox_bench.commands.run_cmd import recipe_parser
from icebox_bench.daemon import DaemonError
from icebox_bench.faasmem_eval import run
from icebox_bench.recipes import faasmem_fig12, faasmem_semiwarm

NAMES = ("faasmem-fig12", "faasmem-semiwarm")
HELP_WITH_OFFLOAD = "  --offload-pool <P>\n  --offload <MODE>\n  --semiwarm <S>\n"


def _settings(name: str, *argv: str) -> dict:
    recipe = recipes.get(name)
    return recipe.settings(recipe_parser(recipe).parse_args(["--out", "x", *argv]), recipe.load_config())


@pytest.mark.parametrize("name", NAMES)
def test_registered_with_a_default_for_every_option_and_the_same_pool_in_every_run(name):
    recipe = recipes.get(name)
    settings = _settings(name)
    assert recipe.option_names() <= set(settings), "every option needs a default in the TOML file"
    assert settings["offload_pool"] == "zram:4GiB"
    assert "--prewarm" in settings["replay_daemon_args"]


@pytest.mark.parametrize("name", NAMES)
def test_help_exits_cleanly_and_no_option_shadows_one_of_the_run_command(name, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", name, "--help"])
    assert stop.value.code == 0
    assert "--offload-pool" in capsys.readouterr().out

    class Bare(recipes.Recipe):
        name = "bare"

    common = set(vars(recipe_parser(Bare()).parse_args(["--out", "x"])))
    assert not recipes.get(name).option_names() & common


def test_fig12_defaults_run_eleven_functions_and_scale_keep_alive_by_the_speed():
    settings = _settings("faasmem-fig12")
    assert len(settings["functions"].split(",")) == 11 and settings["speed"] == 2
    assert faasmem_fig12.keep_alive_and_tail(settings) == (300.0, 300.0)
    assert faasmem_fig12.keep_alive_and_tail({**settings, "speed": 10, "tail": "30s"}) == (60.0, 30.0)
    assert faasmem_fig12.keep_alive_and_tail({**settings, "keep_alive": "2m"}) == (120.0, 120.0)
    assert faasmem_fig12.choices("tmo, faasmem", ("none", "tmo", "faasmem"), "--modes") == ["tmo", "faasmem"]
    with pytest.raises(ValueError):
        faasmem_fig12.choices("tmo,lazy", ("none", "tmo", "faasmem"), "--modes")


def test_semiwarm_runs_faasmem_with_each_variant():
    settings = _settings("faasmem-semiwarm", "--variants", "1MiB/s,off")
    flags = faasmem_semiwarm.flags(settings, "1MiB/s")
    assert run.flag_value(flags, "--offload") == "faasmem" and run.flag_value(flags, "--semiwarm") == "1MiB/s"
    assert run.flag_value(flags, "--keep-alive") == "10m"


def test_flag_values_and_offload_support_are_read_from_argv_and_help():
    assert run.flag_value(["--offload", "tmo", "--offload=faasmem"], "--offload") == "faasmem"
    assert run.flag_value(["--offload-pool", "swap"], "--offload") is None
    assert run.supports_offload(HELP_WITH_OFFLOAD)
    assert not run.supports_offload("  --offload-pool <P>\n  --offload-bandwidth <B>\n")


def test_prerequisites_name_what_is_missing():
    zram = ["--offload-pool", "zram:4GiB", "--offload", "faasmem"]
    with pytest.raises(DaemonError, match="no --offload flag"):
        run.check_prerequisites(zram, help_text="  --reclaim-mode <M>\n", euid=0)
    with pytest.raises(DaemonError, match="needs root"):
        run.check_prerequisites(zram, help_text=HELP_WITH_OFFLOAD, euid=1000)
    with pytest.raises(DaemonError, match="nothing can be offloaded"):
        run.check_prerequisites(["--offload", "tmo"], help_text=HELP_WITH_OFFLOAD, euid=0)
    run.check_prerequisites(zram, help_text=HELP_WITH_OFFLOAD, euid=0)
    run.check_prerequisites(["--offload-pool", "swap"], help_text=HELP_WITH_OFFLOAD, euid=1000)
