"""What a recipe is: a config file (defaults and daemon flags) plus a little code.

A recipe module defines a `Recipe` subclass, decorates it with `@register`, and may ship
`<module>.toml` next to it:

    description = "..."
    [daemon]
    args = ["--keep-alive", "24h"]      # flags for the iceboxd the recipe starts itself
    [defaults]
    iterations = 100                     # option defaults; the command line overrides them

`icebox-bench run NAME --config FILE` overlays another TOML file with the same layout.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..client import IceboxClient
from ..recorder import RunDir
from ..session import RunSession


@dataclass
class RecipeContext:
    client: IceboxClient
    run_dir: RunDir
    session: RunSession
    settings: dict
    functions_dir: Path | None
    own_daemon: bool
    log: Callable[[str], None]
    # The state directory of the daemon the recipe started itself (None with --apihost).
    state_dir: Path | None = None


def _merge(base: dict, overlay: dict) -> dict:
    out = dict(base)
    for key, value in overlay.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


class Recipe:
    name: ClassVar[str]
    description: ClassVar[str] = ""
    # The TOML file next to the recipe's module, if any.
    config_file: ClassVar[Path | None] = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Options of this recipe; use default=None so the config file's defaults apply."""

    def load_config(self, user_file: Path | None = None) -> dict:
        config: dict = {"daemon": {"args": []}, "defaults": {}}
        for path in (self.config_file, user_file):
            if path is not None:
                with open(path, "rb") as f:
                    config = _merge(config, tomllib.load(f))
        return config

    def settings(self, args: argparse.Namespace, config: dict) -> dict:
        """The recipe's effective options: config defaults, overridden by given CLI options."""
        settings = dict(config.get("defaults", {}))
        for key in self.option_names():
            value = getattr(args, key, None)
            if value is not None:
                settings[key] = value
        return settings

    def option_names(self) -> set[str]:
        """The dest of every option add_arguments defines (they must not be required)."""
        parser = argparse.ArgumentParser(add_help=False)
        self.add_arguments(parser)
        return set(vars(parser.parse_args([])))

    def daemon_args(self, config: dict) -> list[str]:
        return [str(a) for a in config.get("daemon", {}).get("args", [])]

    async def run(self, ctx: RecipeContext) -> dict:
        """Do the experiment; return the summary (also written to DIR/summary.json)."""
        raise NotImplementedError

    def render(self, out: Path, summary: dict) -> list[Path]:
        """Write the recipe's tables and plots into `out`; return the files written."""
        return []
