"""Recipes: safe YAML with lines, `defaults:` inheritance, overrides, `--scale tiny`, schema, provenance.

`load_recipe` is the way in; the rest of the harness sees only `Resolved.data`, a complete,
validated recipe with absolute paths, and `RecipeError`, whose text is always one line.
See docs/recipes.md.

Each name is imported from its module on first use (PEP 562): reading a run dir's recipe.yaml
(harness.recipe.yamlsafe) or listing the scales must not load the schema validator.
"""

from __future__ import annotations

from harness.lazy import lazy_exports

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


__getattr__ = lazy_exports(__name__, _HOME, globals())
