"""The recipe registry and how a recipe's settings are assembled."""

from __future__ import annotations

import pytest
from icebox_bench import recipes
from icebox_bench.commands.run_cmd import recipe_parser


def test_frozen_garbage_is_registered_with_its_config_file():
    recipe = recipes.get("frozen-garbage")
    config = recipe.load_config()
    assert config["defaults"] == {"functions": "all", "iterations": 100, "input": "A"}
    assert "--keep-alive" in recipe.daemon_args(config)


def test_command_line_overrides_config_defaults_which_overlay_files_override(tmp_path):
    recipe = recipes.get("frozen-garbage")
    overlay = tmp_path / "mine.toml"
    overlay.write_text('[defaults]\ninput = "B"\n[daemon]\nargs = ["--pause-grace", "1s"]\n')
    config = recipe.load_config(overlay)
    args = recipe_parser(recipe).parse_args(["--out", str(tmp_path / "o"), "--iterations", "7"])
    assert recipe.settings(args, config) == {"functions": "all", "iterations": 7, "input": "B"}
    assert recipe.daemon_args(config) == ["--pause-grace", "1s"]


def test_unknown_recipe_names_the_known_ones():
    with pytest.raises(recipes.UnknownRecipe, match="frozen-garbage"):
        recipes.get("nope")
