"""Recipes: safe YAML with lines, `defaults:` inheritance, overrides, `--scale tiny`, schema, provenance.

`load_recipe` is the way in; the rest of the harness sees only `Resolved.data`, a complete,
validated recipe with absolute paths, and `RecipeError`, whose text is always one line.
See docs/recipes.md.

Each name is imported from its module on first use (PEP 562): reading a run dir's recipe.yaml
(harness.recipe.yamlsafe) or listing the scales must not load the schema validator.
"""

from __future__ import annotations

import importlib

_HOME = {
    "RecipeError": "errors",
    "SCALES": "scales",
    "Resolved": "load",
    "load_recipe": "load",
    "apply_overrides": "overrides",
    "dump_recipe": "show",
    "find_recipes": "find",
    "format_show": "show",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
