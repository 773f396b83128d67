"""The recipe registry. Every module of this package is imported once, so adding a recipe is
adding one module that registers a `Recipe` subclass (see base.py and docs/bench.md)."""

from __future__ import annotations

import importlib
import pkgutil

from .base import Recipe, RecipeContext

REGISTRY: dict[str, type[Recipe]] = {}


class UnknownRecipe(ValueError):
    pass


_discovered = False


def register(cls: type[Recipe]) -> type[Recipe]:
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise ValueError(f"two recipes are named {cls.name!r}")
    REGISTRY[cls.name] = cls
    return cls


def discover() -> dict[str, type[Recipe]]:
    global _discovered
    if not _discovered:
        for module in pkgutil.iter_modules(__path__):
            if module.name != "base":
                importlib.import_module(f"{__name__}.{module.name}")
        _discovered = True
    return REGISTRY


def get(name: str) -> Recipe:
    recipes = discover()
    if name not in recipes:
        raise UnknownRecipe(f"unknown recipe {name!r}; known: {', '.join(sorted(recipes)) or 'none'}")
    return recipes[name]()


__all__ = ["REGISTRY", "Recipe", "RecipeContext", "UnknownRecipe", "discover", "get", "register"]
