"""The two user errors of the threshold language: a bad expression, a bad thresholds file."""

from __future__ import annotations

from harness.errors import UserError


class ThresholdSyntaxError(UserError, ValueError):
    """An expression that is not in the language. One line; `column` is 1-based (0 = whole text)."""

    def __init__(self, message: str, *, column: int = 0) -> None:
        self.reason = message
        self.column = column
        where = f" at column {column}" if column else ""
        super().__init__(f"{message}{where}")


class ThresholdFileError(UserError, ValueError):
    """A thresholds file that cannot be used. The message starts with `file:line:`."""
