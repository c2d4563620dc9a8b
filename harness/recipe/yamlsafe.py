"""The recipe dialect of harness.yamlsafe: its errors as RecipeError, with the recipe's file names.

Every YAML file the harness reads goes through harness.yamlsafe (budgets, duplicate keys, line
marks); this module only says how a recipe shows its errors.
"""

from __future__ import annotations

from pathlib import Path

from harness.recipe.errors import RecipeError, display_path
from harness.yamlsafe import MAX_ALIASES, MAX_DEPTH, MAX_NODES, RECIPE, Lines, YamlError, load_path, load_text
from harness.yamlsafe import reads_as_string as reads_as_string

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_NODES", "Lines", "load_file", "parse_text", "reads_as_string"]


def _recipe_error(error: YamlError) -> RecipeError:
    return RecipeError(error.message, where=error.where, key=error.key)


def parse_text(text: str, *, where: str) -> object:
    """A YAML value from a short text (an override's right-hand side), with the recipe's rules.

    A value that YAML would cut at a comment (`pw #tail` reads as `pw`) is refused: quote it.
    """
    try:
        data, _ = load_text(text, name=where, dialect=RECIPE, line_prefix=False, whole_value=True)
    except YamlError as error:
        raise _recipe_error(error) from None
    return data


def load_file(path: Path) -> tuple[dict, Lines]:
    """The mapping in `path` and the 1-based line of each key path (() is the file itself)."""
    try:
        return load_path(path, name=display_path(path), dialect=RECIPE, kind="recipe", what="a recipe")
    except YamlError as error:
        raise _recipe_error(error) from None
