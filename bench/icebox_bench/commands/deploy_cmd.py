"""`icebox-bench deploy SET`: deploy benchmark functions to a running iceboxd."""

from __future__ import annotations

import asyncio

from .. import manifest
from ..client import IceboxClient, resolve_apihost, resolve_auth
from ..deploy import deploy_all
from .common import add_connection, add_functions_dir, log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "deploy",
        help="deploy a function set as actions",
        description="Deploy functions from the manifests (PUT ?overwrite=true).",
    )
    p.add_argument("set", metavar="SET", help="python, nodejs, java, all, or a comma list of function names")
    add_connection(p)
    add_functions_dir(p)
    p.set_defaults(func=main)


async def _deploy(args) -> int:
    specs = manifest.select(args.set, manifest.load_all(args.functions_dir))
    async with IceboxClient(resolve_apihost(args.apihost), resolve_auth(args.auth)) as client:
        await client.health()
        names = await deploy_all(client, specs, log=log)
    print(f"deployed {len(names)} functions: {', '.join(names)}")
    return 0


def main(args) -> int:
    return asyncio.run(_deploy(args))
