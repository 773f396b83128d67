"""`icebox-bench run RECIPE --out DIR`: one named experiment, start to finish.

Without --apihost the recipe starts its own iceboxd (target/release, a free port, a temporary
state directory, the recipe's daemon flags), so one command reproduces one experiment.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
from pathlib import Path

from .. import recipes
from ..client import IceboxClient, resolve_apihost, resolve_auth
from ..daemon import Daemon
from ..recorder import RunDir
from ..session import RunSession
from .common import add_connection, add_functions_dir, add_sample_period, command_line, log


def add_parser(subparsers) -> None:
    names = sorted(recipes.discover())
    p = subparsers.add_parser(
        "run",
        help="run a named experiment (recipe)",
        add_help=False,
        description=f"Run a recipe ({', '.join(names)}). `icebox-bench run RECIPE --help` lists its options.",
    )
    p.add_argument("recipe", metavar="RECIPE", nargs="?", help=", ".join(names))
    # Everything after the name is parsed by the recipe's own parser (recipes may reuse names).
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=main)


def recipe_parser(recipe: recipes.Recipe) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"icebox-bench run {recipe.name}", description=recipe.description)
    p.add_argument("--out", type=Path, required=True, help="output directory (must be new or empty)")
    p.add_argument("--config", type=Path, default=None, help="TOML overlay for the recipe's config file")
    p.add_argument("--daemon-args", default="", help="extra flags for the iceboxd the recipe starts (quoted)")
    add_connection(p)
    add_functions_dir(p)
    add_sample_period(p)
    recipe.add_arguments(p.add_argument_group(f"{recipe.name} options"))
    return p


async def _run(
    args,
    recipe: recipes.Recipe,
    settings: dict,
    run_dir: RunDir,
    apihost: str,
    auth: str,
    own_daemon: bool,
    daemon_args: list[str],
    state_dir: Path | None = None,
) -> int:
    async with IceboxClient(apihost, auth) as client:
        config = {
            "command": command_line(),
            "kind": "recipe",
            "recipe": recipe.name,
            "settings": settings,
            "own_daemon": own_daemon,
            "daemon_args": daemon_args if own_daemon else None,
        }
        async with RunSession(client, run_dir, config, sample_period_s=args.sample_period, log=log) as session:
            ctx = recipes.RecipeContext(
                client, run_dir, session, settings, args.functions_dir, own_daemon, log, state_dir
            )
            summary = await recipe.run(ctx)
            run_dir.write_json("summary.json", summary)
    files = recipe.render(run_dir.path, summary)
    log("wrote " + ", ".join(str(f) for f in [run_dir.file("summary.json"), *files]))
    failed = session.result.get("failed")
    return 1 if failed else 0


def main(parsed: argparse.Namespace) -> int:
    if parsed.recipe in (None, "-h", "--help"):
        print(f"usage: icebox-bench run RECIPE --out DIR [options]\nrecipes: {', '.join(sorted(recipes.discover()))}")
        return 0 if parsed.recipe else 2
    recipe = recipes.get(parsed.recipe)
    args = recipe_parser(recipe).parse_args(parsed.rest)
    config = recipe.load_config(args.config)
    settings = recipe.settings(args, config)
    run_dir = RunDir(args.out)
    if args.apihost:
        return asyncio.run(
            _run(args, recipe, settings, run_dir, resolve_apihost(args.apihost), resolve_auth(args.auth), False, [])
        )
    daemon_args = recipe.daemon_args(config) + shlex.split(args.daemon_args)
    log(f"starting iceboxd {' '.join(daemon_args)} (log: {run_dir.file('iceboxd.log')})")
    with Daemon(daemon_args, log_path=run_dir.file("iceboxd.log")) as daemon:
        code = asyncio.run(
            _run(
                args, recipe, settings, run_dir, daemon.apihost, daemon.auth, True, daemon_args, Path(daemon.state_dir)
            )
        )
        log("stopping iceboxd")
    return code
