"""Tokenizer for threshold expressions: a fixed set of ASCII tokens, everything else is an error.

Limits keep hostile text harmless: the text length is checked before any work, the token count
while scanning, and each number's length and size as it is read. Only ASCII is accepted outside
quotes and inside them, so a Unicode lookalike (U+2212 minus, a Cyrillic 'а') is an error that
names its code point rather than a different metric.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.thresholds.errors import ThresholdSyntaxError

MAX_TEXT_CHARS = 2000
MAX_TOKENS = 400
MAX_NUMBER_CHARS = 32
MAX_NUMBER = 1e18
MAX_QUOTED_CHARS = 200

# A bare metric name: slashes join segments (train/reward, timing/train/total). Names with other
# characters (a dash, '@', a space) are written in double quotes: "pass@1".
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(?:/[A-Za-z0-9_.]+)*")
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_QUOTED = re.compile(r'"([\x20\x21\x23-\x5b\x5d-\x7e]*)"')
_OPERATORS = ("<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", ")", ",", "=")
_SPACE = " \t\r\n"
_DIGITS = "0123456789"
_DIGITS_NONEMPTY = tuple(_DIGITS)
_HINTS = {
    "[": "subscripts are not supported (write the metric name directly: mean(train/reward))",
    "'": "single quotes are not supported (quote a metric name with double quotes)",
    "%": "'%' is not supported",
    "@": "'@' is not supported outside a double-quoted metric name",
}


@dataclass(frozen=True, slots=True)
class Token:
    """kind is one of: num, name, str (a quoted metric name), op, end. column is 1-based."""

    kind: str
    text: str
    column: int
    value: float | int | str | None = None


def _shown(char: str) -> str:
    return repr(char) if char.isascii() and char.isprintable() else f"U+{ord(char):04X}"


def _char_error(char: str, column: int) -> ThresholdSyntaxError:
    if char in _HINTS:
        return ThresholdSyntaxError(_HINTS[char], column=column)
    return ThresholdSyntaxError(f"unexpected character {_shown(char)}", column=column)


def _number(text: str, pos: int) -> Token:
    match = _NUMBER.match(text, pos)
    assert match is not None
    literal = match.group()
    end = match.end()
    if end < len(text) and (text[end].isalnum() or text[end] in "._"):
        raise ThresholdSyntaxError(f"malformed number {text[pos:end + 1]!r}", column=pos + 1)
    if len(literal) > MAX_NUMBER_CHARS:
        raise ThresholdSyntaxError(f"number longer than {MAX_NUMBER_CHARS} characters", column=pos + 1)
    value: float | int = int(literal) if literal.isdigit() else float(literal)
    if not abs(value) <= MAX_NUMBER:  # also catches an exponent that overflows to inf
        raise ThresholdSyntaxError(f"number {literal} is beyond the limit of {MAX_NUMBER:g}", column=pos + 1)
    return Token("num", literal, pos + 1, value)


def _quoted(text: str, pos: int) -> Token:
    match = _QUOTED.match(text, pos)
    if match is None:
        close = text.find('"', pos + 1)
        if close < 0:
            raise ThresholdSyntaxError("unterminated quoted metric name", column=pos + 1)
        bad = next(i for i in range(pos + 1, close) if not _QUOTED.match(f'"{text[i]}"'))
        raise ThresholdSyntaxError(f"{_shown(text[bad])} is not allowed in a quoted metric name", column=bad + 1)
    name = match.group(1)
    if not name or len(name) > MAX_QUOTED_CHARS:
        raise ThresholdSyntaxError(f"a quoted metric name must have 1 to {MAX_QUOTED_CHARS} characters", column=pos + 1)
    return Token("str", match.group(), pos + 1, name)


def tokenize(text: str) -> list[Token]:
    """Split text into tokens, ending with an `end` token. Raises ThresholdSyntaxError."""
    if not isinstance(text, str):
        raise ThresholdSyntaxError(f"an expression must be text, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ThresholdSyntaxError(f"expression has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char in _SPACE:
            pos += 1
            continue
        if len(tokens) >= MAX_TOKENS:
            raise ThresholdSyntaxError(f"expression has more than {MAX_TOKENS} tokens", column=pos + 1)
        if char in _DIGITS or (char == "." and text[pos + 1 : pos + 2] in _DIGITS_NONEMPTY):
            token = _number(text, pos)
        elif char == '"':
            token = _quoted(text, pos)
        elif match := NAME.match(text, pos):
            token = Token("name", match.group(), pos + 1, match.group())
        elif text.startswith("**", pos):
            raise ThresholdSyntaxError("'**' (power) is not supported", column=pos + 1)
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
            if op is None:
                raise _char_error(char, pos + 1)
            token = Token("op", op, pos + 1, op)
        tokens.append(token)
        pos += len(token.text)
    tokens.append(Token("end", "", len(text) + 1))
    return tokens
