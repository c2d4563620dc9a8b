"""Draft 2020-12, judging values as the engine will take them.

Plain jsonschema let through what the engine then refused, or worse, used: `num_steps: 2.0`
(an integer to JSON Schema, a float to Python), `lr: .nan` (a number), and `name: "adv\\n"`
(Python's `$` matches before a final newline, so `^[a-z0-9_]+$` passed and a run dir named
`adv\\n-...` was made). So, once for every key the schema types:

* integer: a Python int, never a float or a bool;
* number: an int or a finite float, never a bool, NaN or infinity;
* pattern: `$` at the end means the end of the text, as in ECMA-262 (which JSON Schema names);
* format "printable": no control characters (C0, DEL, C1), for strings that become paths,
  commands or environment values.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError

__all__ = ["RecipeValidator", "FORMATS"]


def _is_integer(_checker: object, value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: object, value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _pattern(
    validator: Draft202012Validator, pattern: str, instance: object, schema: dict
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    if re.search(pattern, instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


FORMATS = FormatChecker(formats=())


@FORMATS.checks("printable")
def _printable(value: object) -> bool:
    return not isinstance(value, str) or not any(unicodedata.category(c) == "Cc" for c in value)


_TYPES = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
RecipeValidator = validators.extend(Draft202012Validator, validators={"pattern": _pattern}, type_checker=_TYPES)
