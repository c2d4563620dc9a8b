"""Property: parse(unparse(tree)) == tree for random well-typed trees (hypothesis)."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.thresholds import ThresholdSyntaxError, parse, unparse
from harness.thresholds.lexer import NAME
from harness.thresholds.tree import ARITH_OPS, COMPARE_OPS, FUNCTIONS, BinOp, BoolOp, Call, Compare, Neg, Not, Num

_QUOTABLE = "".join(c for c in string.printable if c not in '"\\\t\n\r\x0b\x0c')
metric_names = st.one_of(
    st.from_regex(NAME, fullmatch=True).filter(lambda name: len(name) <= 40),
    st.text(alphabet=_QUOTABLE, min_size=1, max_size=20),
)
numbers = st.one_of(
    st.integers(min_value=0, max_value=10**18).map(Num),
    st.floats(min_value=0, max_value=1e18, allow_nan=False, allow_infinity=False).map(Num),
)
steps = st.integers(min_value=0, max_value=10**6).flatmap(lambda n: st.sampled_from([Num(n), Neg(Num(n))]))
fractions = st.floats(min_value=0, max_value=0.99).map(Num)
percents = st.floats(min_value=0, max_value=100).map(Num)


@st.composite
def calls(draw, numeric, returns: str):
    func = draw(st.sampled_from(sorted(f for f, spec in FUNCTIONS.items() if spec.returns == returns)))
    params = FUNCTIONS[func].extra + ("start", "end", "trim", "trim_low")
    literal = {"start": steps, "end": steps, "trim": fractions, "trim_low": fractions, "q": percents, "x": numeric}
    values = {name: draw(literal[name]) for name in params}
    required = len(FUNCTIONS[func].extra)
    num_positional = draw(st.integers(min_value=0, max_value=len(params)))
    keyword_names = (draw(st.lists(st.sampled_from(params[num_positional:]), unique=True))
                     if num_positional < len(params) else [])
    keyword_names = list(dict.fromkeys([*params[num_positional:required], *keyword_names]))
    return Call(func, draw(metric_names), tuple(values[p] for p in params[:num_positional]),
                tuple((name, values[name]) for name in keyword_names))


def _numeric_extend(children):
    return st.one_of(
        children.map(Neg),
        st.builds(BinOp, st.sampled_from(ARITH_OPS), children, children),
        calls(children, "num"),
    )


numeric = st.recursive(numbers, _numeric_extend, max_leaves=8)


@st.composite
def comparisons(draw):
    size = draw(st.integers(min_value=1, max_value=3))
    ops = tuple(draw(st.sampled_from(COMPARE_OPS)) for _ in range(size))
    return Compare(draw(numeric), ops, tuple(draw(numeric) for _ in range(size)))


def _bool_extend(children):
    return st.one_of(children.map(Not), st.builds(BoolOp, st.sampled_from(("and", "or")), children, children))


conditions = st.recursive(st.one_of(comparisons(), calls(numeric, "bool")), _bool_extend, max_leaves=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conditions)
def test_parse_of_unparse_is_the_same_tree(tree):
    text = unparse(tree)
    try:
        parsed = parse(text)
    except ThresholdSyntaxError as exc:  # a random tree may exceed the size limits; nothing else may fail
        assume("nests deeper" not in str(exc) and "tokens" not in str(exc) and "characters;" not in str(exc))
        raise
    assert parsed == tree
    assert unparse(parsed) == text


@given(conditions)
@settings(max_examples=25, deadline=None)
def test_unparse_text_is_single_line_ascii(tree):
    text = unparse(tree)
    assert text.isascii() and "\n" not in text
