"""Secrets in a recipe's `env`: which entries are secret, their values at launch, and redaction.

An entry is secret when its name matches `*_KEY`, `*_TOKEN`, `*_SECRET` or `*PASSWORD*`
(any case), or when it is pass-through (`NAME: {from_env: true}`: the value comes from the
launching process's environment). A secret's value is written nowhere: the run dir's
recipe.yaml names it `<redacted>`, the harness hands the value to the engine process through
its environment, and the engine reads every `<redacted>` entry from its own environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from harness.recipe.errors import RecipeError

SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
REDACTED = "<redacted>"


def is_pass_through(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("from_env") is True


def is_secret(name: str, value: object) -> bool:
    return bool(SECRET_NAME.search(name)) or is_pass_through(value) or value == REDACTED


def launch_env(recipe: Mapping, environ: Mapping[str, str], *, missing: str | None = None) -> dict[str, str]:
    """The recipe's env with pass-through entries read from `environ`; a missing one is exit 2,
    unless `missing` stands in for it (the preflight: validating a recipe needs no secret)."""
    out: dict[str, str] = {}
    for name, value in (recipe.get("env") or {}).items():
        if is_pass_through(value) or value == REDACTED:
            if name not in environ and missing is None:
                raise RecipeError(f"pass-through (from_env) but {name} is not set in the launching environment",
                                  key=f"env.{name}")
            out[name] = environ.get(name, missing)
        else:
            out[name] = str(value)
    return out


def redact_recipe(recipe: Mapping) -> dict:
    """A copy of the recipe whose secret env entries read `<redacted>` (what any writer gets)."""
    env = recipe.get("env")
    if not env:
        return dict(recipe)
    return {**recipe, "env": {k: REDACTED if is_secret(k, v) else v for k, v in env.items()}}


def secret_values(recipe: Mapping, environ: Mapping[str, str]) -> list[str]:
    """The values to scrub from logs: every secret entry's value, longest first."""
    values = launch_env(recipe, environ)
    found = {values[k] for k, v in (recipe.get("env") or {}).items() if is_secret(k, v) and values[k]}
    return sorted(found, key=len, reverse=True)


def literal_secrets(recipe: Mapping) -> list[str]:
    """The secret values written in the recipe itself (not pass-through), longest first."""
    env = recipe.get("env") or {}
    found = {v for k, v in env.items() if isinstance(v, str) and v and v != REDACTED and is_secret(k, v)}
    return sorted(found, key=len, reverse=True)


_ENV_OVERRIDE = re.compile(r"^(\+{0,2}env\.([A-Za-z_][A-Za-z0-9_]*)=)(.*)$", re.DOTALL)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line whose secret env overrides (`++env.HF_TOKEN=...`) read `<redacted>`."""
    out = []
    for arg in argv:
        match = _ENV_OVERRIDE.match(arg)
        secret = match and SECRET_NAME.search(match[2]) and "from_env" not in match[3]
        out.append(f"{match[1]}{REDACTED}" if secret else arg)  # a pass-through override holds no value
    return out


def scrub(text: str, values: Iterable[str]) -> str:
    """`text` with each secret value replaced by `<redacted>`."""
    for value in values:
        text = text.replace(value, REDACTED)
    return text
