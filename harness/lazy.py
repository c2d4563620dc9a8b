"""Names a package exports, imported from their modules on first use (PEP 562).

Why: `harness check` must print its verdict before the report writers, the plotting library or
the schema validator are imported; a package that imported all its modules up front would load
them for any one name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, home: Mapping[str, str], namespace: dict) -> Callable[[str], object]:
    """A module `__getattr__` for `package`: name -> the submodule it lives in (`home`), cached
    in the package's `namespace` once imported."""

    def __getattr__(name: str) -> object:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        namespace[name] = value
        return value

    return __getattr__
