"""One file per `harness` sub-command; each exposes `main(args) -> exit code`.

A command's module is imported only when that command runs: `harness check` must not pay for
the imports of `harness run` (the recipe loader, the launcher) before it can print its verdict.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

NAMES = ("calibrate", "check", "compare", "history", "import", "matrix", "nightly", "plan", "run", "sbatch", "show",
         "validate")
MODULES = {"import": "import_reference"}  # `import` is a Python keyword, so not a module name


def _lazy(name: str) -> Callable[[argparse.Namespace], int]:
    def main(args: argparse.Namespace) -> int:
        return importlib.import_module(f"harness.commands.{MODULES.get(name, name)}").main(args)

    main.__name__ = main.__qualname__ = f"{name}_main"
    return main


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {name: _lazy(name) for name in NAMES}
