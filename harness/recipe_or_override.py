"""Whether a command-line argument is an override or a recipe path, by its key alone.

`KEY=VALUE` or `++KEY=VALUE` with KEY a dotted key path (segments of letters, digits, `_` and `-`)
is an override whatever VALUE holds: `checks.thresholds=my/checks.yaml` holds a `/` and ends in
`.yaml`, and is still an override. Anything else is a path, and so is an argument that names an
existing file (`a=b/recipe.yaml` beside you), so that no recipe on disk is read as an override.
Kept free of heavy imports: the CLI decides this before it loads any command.
"""

from __future__ import annotations

import re
from pathlib import Path

_OVERRIDE = re.compile(r"(\+\+)?[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*=.*", re.DOTALL)


def is_override(arg: str) -> bool:
    """True for `a.b=c` and `++a.b=c` (any c) unless `arg` is an existing file; False for a path."""
    if not _OVERRIDE.fullmatch(arg):
        return False
    try:
        return not Path(arg).is_file()
    except (OSError, ValueError):  # a name too long or with a NUL is no file
        return True
