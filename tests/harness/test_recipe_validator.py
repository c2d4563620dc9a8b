"""The recipe validator judges values as the engine takes them (harness/recipe/validator.py)."""

from __future__ import annotations

import pytest

from harness.recipe.validator import FORMATS, RecipeValidator

INT = RecipeValidator({"type": "integer"})
NUM = RecipeValidator({"type": "number"})
NAME = RecipeValidator({"type": "string", "pattern": "^[a-z0-9_]+$"})
PRINTABLE = RecipeValidator({"type": "string", "format": "printable"}, format_checker=FORMATS)


@pytest.mark.parametrize("value, ok", [(2, True), (0, True), (10**30, True), (2.0, False), (True, False), ("2", False)])
def test_integer_is_a_python_int(value, ok):
    """jsonschema alone counts 2.0 as an integer; the engine refused it after validate passed."""
    assert INT.is_valid(value) is ok


@pytest.mark.parametrize("value, ok", [(1, True), (1.5, True), (10**400, True), (float("nan"), False),
                                       (float("inf"), False), (float("-inf"), False), (False, False)])
def test_number_is_finite_and_not_a_bool(value, ok):
    assert NUM.is_valid(value) is ok


@pytest.mark.parametrize("value, ok", [("adv", True), ("adv\n", False), ("adv\nx", False), ("", False)])
def test_a_final_dollar_is_the_end_of_the_text(value, ok):
    """Python's `$` also matches before a final newline: a run dir named 'adv\\n-...' was made."""
    assert NAME.is_valid(value) is ok


def test_an_escaped_dollar_stays_literal():
    assert RecipeValidator({"pattern": "^a\\$"}).is_valid("a$")


@pytest.mark.parametrize("value, ok", [("ckpt/dir", True), ("INFO", True), ("caf\u00e9 \u00fc", True),
                                       ("a\nb", False), ("a\tb", False), ("a\x1b[2J", False), ("a\x00", False),
                                       ("a\x7f", False), ("a\x85", False)])
def test_printable_refuses_control_characters(value, ok):
    assert PRINTABLE.is_valid(value) is ok
