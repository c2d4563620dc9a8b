"""Read one of the reference's test-suite drivers (a bash script) without running it.

What is read: the integer settings of its config block (`NUM_NODES=2`, `MAX_STEPS=20`, ...),
the training command (`uv run examples/run_<x>.py --config ... a.b=c ...`) and its `a.b=c`
overrides, every `tests/check_metrics.py` call with each check's text and line, and the early-stop
guard (`if [[ $(jq ...) -ge $MAX_STEPS ]]`) around a call. Words are split as bash splits them
('...' literal, "..." with \\" and $VAR, backslash-newline continuation); `$VAR` and `${VAR}` are
replaced by the config block's integers and left as `$VAR` otherwise (reported as unresolved).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Call", "Script", "Word", "read_script"]

_ASSIGN = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)=(\d+)\s*(#.*)?$")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_RUN = re.compile(r"examples/(?:[\w.-]+/)*(run_\w+)\.py")
_OVERRIDE = re.compile(r"^[A-Za-z_][\w.\-]*=")


@dataclass
class Word:
    text: str
    line: int
    unresolved: tuple[str, ...] = ()


@dataclass
class Call:
    line: int
    words: list[Word]
    guard_line: int | None = None


@dataclass
class Script:
    variables: dict[str, int] = field(default_factory=dict)
    driver: str | None = None
    driver_line: int | None = None
    overrides: list[Word] = field(default_factory=list)
    checks: list[Call] = field(default_factory=list)
    delegates: bool = False


def _expand(text: str, variables: dict[str, int], unresolved: list[str]) -> str:
    def sub(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name in variables:
            return str(variables[name])
        unresolved.append(name)
        return match.group(0)

    return _VAR.sub(sub, text)


def _dollar(text: str, j: int, buf: list[str], variables: dict[str, int], unresolved: list[str]) -> int:
    """At a `$` in `text[j]`: append the expanded variable (or the `$` itself) to `buf`; returns
    the index of the last character consumed."""
    match = _VAR.match(text, j)
    if not match:
        buf.append("$")
        return j
    buf.append(_expand(match.group(0), variables, unresolved))
    return match.end() - 1


def _words(lines: list[str], start: int, variables: dict[str, int]) -> tuple[list[Word], int]:
    """Split the logical line beginning at index `start` into words; (words, index after it)."""
    words: list[Word] = []
    i, n = start, len(lines)
    buf: list[str] = []
    unresolved: list[str] = []
    word_line = start + 1
    quote = None
    while i < n:
        text, j = lines[i], 0
        while j < len(text):
            ch = text[j]
            if quote == "'":
                if ch == "'":
                    quote = None
                else:
                    buf.append(ch)
            elif quote == '"':
                if ch == "\\" and j + 1 < len(text) and text[j + 1] in '"\\$`':
                    buf.append("\x00" if text[j + 1] == "$" else text[j + 1])
                    j += 1
                elif ch == '"':
                    quote = None
                elif ch == "$":
                    j = _dollar(text, j, buf, variables, unresolved)
                else:
                    buf.append(ch)
            elif ch in "'\"":
                if not buf:
                    word_line = i + 1
                quote = ch
            elif ch == "\\" and j == len(text) - 1:
                break  # continuation: the logical line goes on
            elif ch.isspace():
                if buf:
                    words.append(Word("".join(buf).replace("\x00", "$"), word_line, tuple(unresolved)))
                    buf, unresolved = [], []
            elif ch == "#" and not buf:
                j = len(text)
                continue
            elif ch == "$":
                if not buf:
                    word_line = i + 1
                j = _dollar(text, j, buf, variables, unresolved)
            else:
                if not buf:
                    word_line = i + 1
                buf.append(ch)
            j += 1
        if quote is not None:  # a quoted word spans lines
            buf.append("\n")
            i += 1
            continue
        if text.rstrip().endswith("\\") and not text.rstrip().endswith("\\\\"):
            if buf:
                words.append(Word("".join(buf).replace("\x00", "$"), word_line, tuple(unresolved)))
                buf, unresolved = [], []
            i += 1
            continue
        break
    if buf:
        words.append(Word("".join(buf).replace("\x00", "$"), word_line, tuple(unresolved)))
    return words, i + 1


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def read_script(text: str) -> Script:
    lines = text.split("\n")
    script = Script()
    for line in lines:
        match = _ASSIGN.match(line)
        if match:
            script.variables[match.group(1)] = int(match.group(2))
    steps, per_run = script.variables.get("MAX_STEPS"), script.variables.get("STEPS_PER_RUN")
    if steps is not None and per_run:
        script.variables["NUM_RUNS"] = (steps + per_run - 1) // per_run
    guard: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_comment(line):
            i += 1
            continue
        if "jq" in line and "-ge" in line and re.search(r"\bif\b", line):
            guard = i + 1
        if re.match(r"\s*fi\b", line):
            guard = None
        if "bash" in line and "BASE_RECIPE" in line:  # a wrapper: `bash "$SCRIPT_DIR/$BASE_RECIPE.sh"`
            script.delegates = True
        run = _RUN.search(line)
        if run and script.driver is None:
            words, after = _words(lines, i, script.variables)
            script.driver, script.driver_line = run.group(1), i + 1
            at = next(k for k, w in enumerate(words) if _RUN.search(w.text))  # env assignments precede it
            script.overrides = [w for w in words[at + 1:] if _OVERRIDE.match(w.text)]
            i = after
            continue
        if "check_metrics.py" in line:
            words, after = _words(lines, i, script.variables)
            at = next((k for k, w in enumerate(words) if w.text.endswith("check_metrics.py")), None)
            if at is not None:
                checks = []
                for word in words[at + 2:]:  # after the script and the metrics file
                    if word.text in ("|", "||", "&&", ";", "2>&1") or word.text.startswith(">"):
                        break
                    checks.append(word)
                script.checks.append(Call(line=i + 1, words=checks, guard_line=guard))
            i = after
            continue
        i += 1
    return script
