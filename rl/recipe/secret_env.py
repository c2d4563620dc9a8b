"""Secret env entries on the engine side: read from our own environment, never written.

The harness writes a secret recipe env entry as `<redacted>` (or a hand-written recipe says
`{from_env: true}`) and hands the value to this process through its environment. Such entries,
in any of the recipe's env mappings (`SCOPES`), are resolved here; their names are what env.json
redacts. Workers report a salted hash of each env value (salt per run), so env_propagated
compares hashes, not values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"
# A Ray job (harness run --ray-address) names here a 0600 file of its env values in the run dir,
# so that they travel in no runtime_env (Ray logs those and puts them on worker command lines).
ENV_FILE = "RL_ENV_FILE"
# Where a recipe holds env mappings: the engine's and every worker's, then one role's workers' (RunConfig.worker_env).
SCOPES = ("env", "policy.env", "generation.env")


def _from_env(value: Any) -> bool:
    return value == REDACTED or (isinstance(value, Mapping) and value.get("from_env") is True)


def scopes(recipe: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(dotted key, mapping) of each env mapping a raw recipe sets, in `SCOPES` order."""
    out = []
    for scope in SCOPES:
        node: Any = recipe
        for part in scope.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and node:
            out.append((scope, node))
    return out


def resolve_recipe(recipe: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """A copy of a raw recipe whose env mappings (every scope) have their pass-through entries
    read from `environ`."""
    out = dict(recipe)
    for scope, env in scopes(recipe):
        *parents, leaf = scope.split(".")
        node = out
        for part in parents:  # copied on the way down: the caller's recipe stays as it was
            node[part] = dict(node[part])
            node = node[part]
        node[leaf] = resolve(env, environ, scope=scope)[0]
    return out


def resolve(env: Mapping[str, Any] | None, environ: Mapping[str, str],
            *, scope: str = "env") -> tuple[dict[str, Any], list[str]]:
    """(env with pass-through entries read from `environ`, the names of those entries)."""
    resolved, hidden = {}, []
    for name, value in (env or {}).items():
        if _from_env(value):
            if name not in environ:
                raise ValueError(f"{scope}.{name}: pass-through (from_env) but {name} is not set in the engine's "
                                 "environment")
            resolved[name], value = environ[name], environ[name]
            hidden.append(name)
        resolved[name] = value
    return resolved, hidden


def digest(salt: str, value: str | None) -> str | None:
    """A salted hash of one env value (None: the variable was unset)."""
    if value is None:
        return None
    return hashlib.sha256(f"{salt}\0{value}".encode()).hexdigest()


def hidden_names(env: Mapping[str, Any] | None) -> list[str]:
    """The names of a recipe env's pass-through entries (`<redacted>` or `{from_env: true}`)."""
    return [name for name, value in (env or {}).items() if _from_env(value)]


def take_env_file(environ: dict[str, str]) -> list[str]:
    """Move the values of the file `environ[ENV_FILE]` names into `environ`, then delete the file
    (read once, by the engine's driver); the names it set. Without ENV_FILE, nothing."""
    import json
    import os

    path = environ.pop(ENV_FILE, None)
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise ValueError(f"{ENV_FILE}: {path} is not a JSON object of strings")
    environ.update(values)
    return sorted(values)
