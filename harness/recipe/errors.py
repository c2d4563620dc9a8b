"""The one error a recipe can raise, and where it points.

Every recipe problem, from a YAML syntax error to a schema violation, becomes a `RecipeError`
whose text is a single line: `<file>:<line>: <key.path>: <message> (did you mean '<key>'?)`,
so a CLI, a CI log and a test can all show it without a traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError, capped_line
from harness.errors import dotted as dotted


class RecipeError(UserError):
    """A user error in a recipe, an override or a defaults chain.

    where: "file:line", "file" or "file: override 'a.b=c'" (empty if unknown).
    key: the dotted key path at fault ("" when the whole file is at fault).
    suggestion: the nearest valid key or value, shown as "did you mean".
    """

    def __init__(self, message: str, *, where: str = "", key: str = "", suggestion: str | None = None):
        self.message = capped_line(str(message), 600)   # each part capped: a value we echo may be hostile
        self.where = capped_line(str(where), 300)
        self.key = capped_line(str(key), 200)
        self.suggestion = None if suggestion is None else capped_line(str(suggestion), 100)
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.where, self.key) if p]
        text = ": ".join(parts + [self.message])
        if self.suggestion is not None:
            text += f" (did you mean '{self.suggestion}'?)"
        return text


def nearest(word: object, choices: Iterable[object], *, cutoff: float = 0.6) -> str | None:
    """The closest of `choices` to `word` (difflib), or None when nothing is close."""
    names = [str(c) for c in choices]
    found = difflib.get_close_matches(str(word), names, n=1, cutoff=cutoff)
    return found[0] if found else None


def display_path(path: Path) -> str:
    """A path as a user typed it: relative to the working directory when below it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


@dataclass(frozen=True, kw_only=True)
class Origin:
    """Who set a value: a file line, a command-line override, a tiny twin entry or a default.

    label is the provenance text (`harness show --provenance`); where prefixes error messages;
    base_dir is what a relative path set here is relative to; key_prefix is where the value sits
    in its file when that differs from its place in the recipe (`tiny`, a parity variant).
    """

    label: str
    where: str
    base_dir: Path
    key_prefix: str = ""

    def key(self, path: Iterable[object]) -> str:
        """The key path to show for an error at `path` of a value set here."""
        return ".".join(p for p in (self.key_prefix, dotted(path)) if p)

    @classmethod
    def file(cls, path: Path, line: int) -> Origin:
        text = f"{display_path(path)}:{line}"
        return cls(label=text, where=text, base_dir=Path(path).resolve().parent)

    @classmethod
    def override(cls, text: str, recipe: Path, *, base_dir: Path | None = None) -> Origin:
        label = f"override '{capped_line(text, 200)}'"
        return cls(label=label, where=f"{display_path(recipe)}: {label}",
                   base_dir=base_dir or Path(os.getcwd()))

    @classmethod
    def twin(cls, scale: str, entry: Origin) -> Origin:
        return cls(label=f"{scale} twin ({entry.label})", where=entry.where, base_dir=entry.base_dir,
                   key_prefix=scale)

    @classmethod
    def default(cls, recipe: Path, label: str = "schema default") -> Origin:
        return cls(label=label, where=display_path(recipe), base_dir=Path(recipe).resolve().parent)
