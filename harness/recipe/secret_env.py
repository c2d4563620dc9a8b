"""Secrets in a recipe's env mappings: which entries are secret, their values at launch, and redaction.

A recipe has three env mappings (`SCOPES`): `env` for the engine process and every worker,
`policy.env` and `generation.env` for one role's workers. An entry of any of them is secret
when its name matches `*_KEY`, `*_TOKEN`, `*_SECRET` or `*PASSWORD*` (any case), or when it is
pass-through (`NAME: {from_env: true}`: the value comes from the launching process's
environment). A secret's value is written nowhere: the run dir's recipe.yaml names it
`<redacted>`, the harness hands the value to the engine process through its environment, and
the engine reads every `<redacted>` entry from its own environment. That environment holds one
value per name, so a secret's name must carry the same value in every mapping that sets it
(`clash`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from harness.recipe.errors import RecipeError

SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
REDACTED = "<redacted>"
SCOPES = (("env",), ("policy", "env"), ("generation", "env"))  # the engine's and every worker's, then one role's


def is_pass_through(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("from_env") is True


def is_secret(name: str, value: object) -> bool:
    return bool(SECRET_NAME.search(name)) or is_pass_through(value) or value == REDACTED


def envs(recipe: Mapping) -> list[tuple[tuple[str, ...], Mapping]]:
    """(key path, mapping) of each env mapping the recipe sets, in `SCOPES` order."""
    out = []
    for path in SCOPES:
        node: object = recipe
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and node:
            out.append((path, node))
    return out


def clash(recipe: Mapping) -> tuple[tuple[str, ...], str] | None:
    """The first secret entry whose name another env mapping sets to another value, as (its key
    path, why); None when every secret's name has one value."""
    first: dict[str, tuple[tuple[str, ...], object]] = {}
    for path, env in envs(recipe):
        for name, value in env.items():
            before = first.setdefault(name, (path, value))
            if before[1] != value and (is_secret(name, value) or is_secret(name, before[1])):
                where = ".".join((*before[0], name))
                return path + (name,), (f"a secret reaches the engine through its environment under its own name, "
                                        f"so it takes one value, and {where} sets another; set it once, in env")
    return None


def launch_env(recipe: Mapping, environ: Mapping[str, str], *, missing: str | None = None) -> dict[str, str]:
    """The engine process's env from the recipe: the top-level env and every role env's secrets
    (the engine reads those from its environment; a role's other entries reach only its workers),
    pass-through entries read from `environ`. A missing one is exit 2, unless `missing` stands
    in for it (the preflight: validating a recipe needs no secret)."""
    out: dict[str, str] = {}
    for path, env in envs(recipe):
        for name, value in env.items():
            if path != ("env",) and not is_secret(name, value):
                continue
            if is_pass_through(value) or value == REDACTED:
                if name not in environ and missing is None:
                    raise RecipeError(f"pass-through (from_env) but {name} is not set in the launching "
                                      "environment", key=".".join((*path, name)))
                out[name] = environ.get(name, missing)
            else:
                out[name] = str(value)
    return out


def redact_recipe(recipe: Mapping) -> dict:
    """A copy of the recipe whose secret env entries read `<redacted>` (what any writer gets)."""
    out = dict(recipe)
    for path, env in envs(recipe):
        node = out
        for key in path[:-1]:  # copied on the way down: the caller's recipe stays as it was
            node[key] = dict(node[key])
            node = node[key]
        node[path[-1]] = {k: REDACTED if is_secret(k, v) else v for k, v in env.items()}
    return out


def secret_values(recipe: Mapping, environ: Mapping[str, str]) -> list[str]:
    """The values to scrub from logs: every secret entry's value, longest first."""
    values = launch_env(recipe, environ)
    found = {values[k] for _, env in envs(recipe) for k, v in env.items() if is_secret(k, v) and values[k]}
    return sorted(found, key=len, reverse=True)


def literal_secrets(recipe: Mapping) -> list[str]:
    """The secret values written in the recipe itself (not pass-through), longest first."""
    found = {v for _, env in envs(recipe) for k, v in env.items()
             if isinstance(v, str) and v and v != REDACTED and is_secret(k, v)}
    return sorted(found, key=len, reverse=True)


_ENV_OVERRIDE = re.compile(r"^(\+{0,2}(?:(?:policy|generation)\.)?env\.([A-Za-z_][A-Za-z0-9_]*)=)(.*)$", re.DOTALL)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line whose secret env overrides (`++env.HF_TOKEN=...`, `++policy.env.HF_TOKEN=...`)
    read `<redacted>`."""
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


def is_secret_key(keys: tuple[str, ...]) -> bool:
    """Whether an override of `keys` may carry a secret: a secret-named entry of an env mapping,
    or a whole env mapping (its values are not looked at: the text may not even parse)."""
    for scope in SCOPES:
        if keys[: len(scope)] == scope:
            return len(keys) == len(scope) or bool(SECRET_NAME.search(keys[len(scope)]))
    return False
