"""Recipes: safe YAML with lines, `defaults:` inheritance, overrides, `--scale tiny`, schema, provenance.

`load_recipe` is the way in; the rest of the harness sees only `Resolved.data`, a complete,
validated recipe with absolute paths, and `RecipeError`, whose text is always one line.
See docs/recipes.md.
"""

from harness.recipe.errors import RecipeError
from harness.recipe.find import find_recipes
from harness.recipe.load import SCALES, Resolved, load_recipe
from harness.recipe.overrides import apply_overrides
from harness.recipe.show import dump_recipe, format_show

__all__ = [
    "RecipeError",
    "SCALES",
    "Resolved",
    "apply_overrides",
    "dump_recipe",
    "find_recipes",
    "format_show",
    "load_recipe",
]
