"""Refuse YAML that PyYAML cannot take safely, before it composes anything.

PyYAML's composer and constructor recurse once per level, so `[[[[...]]]]` 5,000 deep raised
RecursionError (an internal error, exit 3) before our depth check on the composed nodes could
run; its parser is an explicit state machine, so counting start/end events is iterative and
safe at any depth. Its reader refuses control characters such as NUL when the loader is built,
outside the try that turned YAML errors into one line (exit 3 again). Recipes, override values
and thresholds files all go through `first_problem` first.
"""

from __future__ import annotations

import yaml
from yaml.events import CollectionEndEvent, CollectionStartEvent
from yaml.reader import ReaderError

__all__ = ["MAX_DEPTH", "first_problem"]

MAX_DEPTH = 64  # nested mappings/lists; a real recipe nests 4 or 5 deep


# libyaml's event parser, when PyYAML has it: ~10x faster than the Python one on a resolved recipe.
_C_LOADER = getattr(yaml, "CSafeLoader", None)


def _too_deep(events, limit: int) -> tuple[int, str] | None:
    depth = 0
    for event in events:
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > limit:
                return event.start_mark.line + 1, f"nested deeper than {limit} levels"
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
    return None


def first_problem(text: str, *, limit: int = MAX_DEPTH) -> tuple[int, str] | None:
    """(1-based line, message) of a control character or of nesting past `limit`, else None.

    Raises yaml.YAMLError for a syntax error met on the way (callers already report those).
    Text that libyaml's parser takes is counted there; anything it refuses is parsed again
    by PyYAML's own parser, whose errors and control-character positions are the ones reported.
    """
    if _C_LOADER is not None:
        try:
            return _too_deep(yaml.parse(text, Loader=_C_LOADER), limit)
        except yaml.YAMLError:
            pass  # libyaml refused it: the Python parser below reports the error the same way as before
    try:
        return _too_deep(yaml.parse(text, Loader=yaml.SafeLoader), limit)
    except ReaderError as exc:
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        line = text[: exc.position].count("\n") + 1
        return line, f"control character U+{char:04X} is not allowed in YAML; remove it"
    return None
