"""Hostile text is rejected with a clear, positioned error in bounded time and never executed.

Time is bounded with pytest-timeout (generous), not with timed asserts.
"""

from __future__ import annotations

import pytest

from harness.thresholds import ThresholdSyntaxError, evaluate, parse
from harness.thresholds.lexer import MAX_TEXT_CHARS, MAX_TOKENS
from harness.thresholds.parser import MAX_DEPTH

pytestmark = pytest.mark.timeout(10)

HOSTILE = [
    ("__import__('os').system('true') > 0", "single quotes are not supported", 12),
    ('__import__("os") > 0', "unknown function '__import__'", 1),
    ('os.system("true") > 0', "unknown function 'os.system'", 1),
    ("().__class__.__bases__ > 0", "unexpected character '.'", 3),
    ("mean(x).__class__ > 0", "unexpected character '.'", 8),
    ("mean(x)[0] > 0", "subscripts are not supported", 8),
    ("mean(data['train/reward']) > 0", "subscripts are not supported", 10),
    ('eval("1") > 0', "unknown function 'eval'", 1),
    ("mean(x, key=exec) > 0", "mean() has no parameter 'key'", 9),
    ("mean(x, start=exec) > 0", "metric 'exec' needs a function", 15),
    ("9**9**9 > 0", "'**' (power) is not supported", 2),
    ("lambda: 1 > 0", "unexpected character ':'", 7),
    ("[x for x in ()] > 0", "subscripts are not supported", 1),
    ("mean(x) > 0; import os", "unexpected character ';'", 12),
    ("mean(x) > 0 # comment", "unexpected character '#'", 13),
    ("mean(x) > 0 if 1 else 0", "expected an operator or the end, got 'if'", 13),
    ("mean(x) > 0\x00", "unexpected character U+0000", 12),
    ("mean(x) \u2212 1 > 0", "unexpected character U+2212", 9),   # minus sign lookalike
    ("mean(\u0445) > 0", "unexpected character U+0445", 6),       # Cyrillic 'x'
    ("m\u0435an(x) > 0", "unexpected character U+0435", 2),       # Cyrillic 'e' inside a name
    ("mean(x) > \uff11", "unexpected character U+FF11", 11),      # fullwidth digit one
    ("mean(x) > 0.\u0661", "malformed number", 11),               # Arabic-Indic digit after a dot
    ('mean("a\u200bb") > 0', "U+200B is not allowed in a quoted metric name", 8),  # zero-width space
    ('mean("a\\"b") > 0', "'\\\\' is not allowed in a quoted metric name", 8),
    ("mean(x) > 1" + "0" * 40, "number longer than 32 characters", 11),
    ("mean(x) > 1e19", "beyond the limit", 11),
    ("mean(x) > 1e308000", "beyond the limit", 11),
]


@pytest.mark.parametrize("text, message, column", HOSTILE)
def test_hostile_expressions_are_syntax_errors(text, message, column):
    with pytest.raises(ThresholdSyntaxError) as info:
        parse(text)
    assert message in str(info.value)
    assert info.value.column == column, str(info.value)
    assert "\n" not in str(info.value)


def test_deep_parentheses_stop_at_the_depth_limit():
    with pytest.raises(ThresholdSyntaxError, match=f"nests deeper than {MAX_DEPTH} levels at column {MAX_DEPTH + 1}"):
        parse("(" * 150 + "1" + ")" * 150 + " > 0")
    with pytest.raises(ThresholdSyntaxError, match="more than 400 tokens"):
        parse("(" * 900 + "1" + ")" * 900 + " > 0")


@pytest.mark.parametrize("prefix", ["-", "not ", "mean(x, "])
def test_deep_unary_and_call_nesting_stop_at_the_depth_limit(prefix):
    text = prefix * 50 + "1"
    with pytest.raises(ThresholdSyntaxError, match=f"nests deeper than {MAX_DEPTH} levels"):
        parse(text)


def test_exactly_the_depth_limit_is_accepted():
    assert parse("(" * (MAX_DEPTH - 1) + "mean(x) > 0" + ")" * (MAX_DEPTH - 1))


def test_huge_input_is_rejected_before_any_work():
    with pytest.raises(ThresholdSyntaxError, match=f"100000 characters; the limit is {MAX_TEXT_CHARS}"):
        parse("1 + " * 25_000)


def test_too_many_tokens():
    text = "+".join(["1"] * (MAX_TOKENS // 2 + 10)) + " > 0"
    assert len(text) <= MAX_TEXT_CHARS
    with pytest.raises(ThresholdSyntaxError, match=f"more than {MAX_TOKENS} tokens"):
        parse(text)


def test_non_text_is_rejected():
    with pytest.raises(ThresholdSyntaxError, match="must be text"):
        parse(b"mean(x) > 0")  # type: ignore[arg-type]


def test_hostile_text_through_evaluate_is_a_failing_verdict_not_an_exception():
    result = evaluate('__import__("os") > 0', {"x": {1: 1.0}}, expected_steps=None)
    assert not result.ok and result.reason.startswith("syntax error: unknown function '__import__'")


def test_overflowing_arithmetic_fails_closed():
    result = evaluate("last(x) / 1e-300 / 1e-300 > 0", {"x": {1: 1e18}}, expected_steps=None)
    assert not result.ok and "arithmetic overflow" in result.reason
