"""Secret env entries on the engine side: read from our own environment, never written.

The harness writes a secret recipe env entry as `<redacted>` (or a hand-written recipe says
`{from_env: true}`) and hands the value to this process through its environment. Such entries
are resolved here; their names are what env.json redacts. Workers report a salted hash of each
env value (salt per run), so env_propagated compares hashes, not values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"


def _from_env(value: Any) -> bool:
    return value == REDACTED or (isinstance(value, Mapping) and value.get("from_env") is True)


def resolve(env: Mapping[str, Any] | None, environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(env with pass-through entries read from `environ`, the names of those entries)."""
    resolved, hidden = {}, []
    for name, value in (env or {}).items():
        if _from_env(value):
            if name not in environ:
                raise ValueError(f"env.{name}: pass-through (from_env) but {name} is not set in the engine's "
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
