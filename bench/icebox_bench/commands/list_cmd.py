"""`icebox-bench list`: the functions in the manifests and the registered recipes."""

from __future__ import annotations

from .. import manifest, recipes
from .common import add_functions_dir


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("list", help="list functions and recipes")
    add_functions_dir(p)
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        specs = manifest.load_all(args.functions_dir)
    except manifest.ManifestError as e:
        print(f"functions: {e}")
        specs = []
    for spec in specs:
        inputs = ",".join(sorted(spec.inputs)) or "-"
        print(f"{spec.name:24} {spec.language:7} {spec.kind:10} inputs {inputs:4} {spec.description}")
    print()
    for name, cls in sorted(recipes.discover().items()):
        print(f"recipe {name:18} {cls.description}")
    return 0
