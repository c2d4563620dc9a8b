"""The errors a user can cause: the CLI reports each as one line with exit code 2.

Every such error type subclasses `UserError`, defined here, so this module imports nothing and
no list of types has to be kept in step with the packages that raise them. (It used to import
each package's error type to gather them, which made importing `UsageError` load the recipe
loader, the planner and the preflight, and made harness.preflight import harness.engines late
to break the cycle.)
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user gave cannot be used: a recipe, an option, a thresholds file, a metrics file."""


class UsageError(UserError):
    """A command was given something it cannot use (a missing run dir, a bad option value)."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError,)
