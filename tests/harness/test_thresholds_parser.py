"""The grammar: precedence, chained comparisons, metric names with slashes, arguments."""

from __future__ import annotations

import pytest

from harness.thresholds import ThresholdSyntaxError, parse, unparse
from harness.thresholds.tree import BinOp, BoolOp, Call, Compare, Neg, Not, Num


def _mean(metric, *args, **kwargs):
    return Call("mean", metric, tuple(args), tuple(kwargs.items()))


def test_the_brief_example():
    tree = parse("mean(train/reward, -5) > mean(train/reward, 1, 5) + 0.1")
    assert tree == Compare(
        _mean("train/reward", Neg(Num(5))), (">",),
        (BinOp("+", _mean("train/reward", Num(1), Num(5)), Num(0.1)),),
    )


def test_slashes_inside_a_metric_argument_belong_to_the_name_and_divide_outside():
    tree = parse("last(timing/train/total)/last(timing/train/gen) < 2")
    ratio = BinOp("/", Call("last", "timing/train/total"), Call("last", "timing/train/gen"))
    assert tree == Compare(ratio, ("<",), (Num(2),))


def test_quoted_metric_names_allow_other_characters():
    assert parse('max("val/pass@1") >= 0.5').left == Call("max", "val/pass@1")
    assert parse('max("mean") >= 0.5').left == Call("max", "mean")


def test_arithmetic_precedence_and_left_associativity():
    tree = parse("1 - 2 - 3 * -4 / 5 < 0")
    expected = BinOp("-", BinOp("-", Num(1), Num(2)), BinOp("/", BinOp("*", Num(3), Neg(Num(4))), Num(5)))
    assert tree == Compare(expected, ("<",), (Num(0),))


def test_boolean_precedence_not_binds_looser_than_comparison():
    a, b, c = "last(a) > 1", "last(b) > 1", "last(c) > 1"
    tree = parse(f"not {a} or {b} and {c}")
    assert tree == BoolOp("or", Not(parse(a)), BoolOp("and", parse(b), parse(c)))


def test_chained_comparison_is_one_node():
    tree = parse("0 <= mean(x) < 1")
    assert tree == Compare(Num(0), ("<=", "<"), (_mean("x"), Num(1)))


def test_keyword_arguments_and_numbers():
    tree = parse("mean(train/reward, start=-6, end=-1, trim=0.1) > 1e-3")
    assert tree.left == _mean("train/reward", start=Neg(Num(6)), end=Neg(Num(1)), trim=Num(0.1))
    assert tree.rights == (Num(0.001),)
    assert parse("percentile(x, 90, -10) < .5").left == Call("percentile", "x", (Num(90), Neg(Num(10))))
    assert parse("ratio_above(x, x=0.5) > 0").left == Call("ratio_above", "x", (), (("x", Num(0.5)),))


def test_numbers_keep_int_or_float():
    assert type(parse("count(x) > 7").rights[0].value) is int
    assert type(parse("count(x) > 7.0").rights[0].value) is float


@pytest.mark.parametrize("text, message, column", [
    ("", "empty expression", 0),
    ("mean(x)", "a check must be a condition, not a number", 1),
    ("mean(x) > 1 and 2", "the right side of 'and' must be a condition", 17),
    ("all_finite(x) > 1", "the left side of '>' must be a number", 1),
    ("not mean(x)", "the operand of 'not' must be a condition", 5),
    ("train/reward > 1", "metric 'train/reward' needs a function", 1),
    ("maen(x) > 1", "unknown function 'maen'; did you mean 'mean'?", 1),
    ("mean(mean(x)) > 1", "mean() takes a metric name first", 6),
    ("mean(and) > 1", "mean() takes a metric name first", 6),
    ("mean(x, foo=1) > 1", "mean() has no parameter 'foo' (parameters: start, end, trim, trim_low)", 9),
    ("mean(x, 1, start=2) > 1", "start given twice", 12),
    ("mean(x, start=1, 2) > 1", "a positional argument follows a keyword argument", 18),
    ("mean(x, 1, 2, 0.1, 0.1, 5) > 1", "takes at most 4 arguments", 25),
    ("percentile(x) > 1", "percentile() needs q after the metric", 13),
    ("mean(x, trim=1) > 0", "trim must be a fraction in [0, 1), got 1", 14),
    ("mean(x, 1.5) > 0", "start must be a whole step number", 9),
    ("percentile(x, 101) > 0", "q must be a percentile in [0, 100]", 15),
    ("mean(x, 1 > 2) > 0", "expected ',' or ')'", 0),
    ("mean(x) > 1 1", "expected an operator or the end, got '1'", 13),
    ("(mean(x) > 1", "expected ')' to close the '(' at column 1", 13),
    ("mean(x) >", "got end of expression", 10),
    ("mean(x) = 1", "expected an operator or the end, got '='", 9),
    ("1.2.3 > 0", "malformed number", 1),
    ("1e > 0", "malformed number", 1),
    ('mean("x) > 0', "unterminated quoted metric name", 6),
])
def test_errors_name_the_problem_and_column(text, message, column):
    with pytest.raises(ThresholdSyntaxError) as info:
        parse(text)
    error = info.value
    assert message in str(error)
    if column:
        assert error.column == column, str(error)
    assert "\n" not in str(error)


def test_unparse_is_canonical_text():
    text = "not (mean(a) > 1 or last(\"b-c\") < 2) and (1 - (2 - 3)) * -(4 + 5) != 0"
    assert unparse(parse(text)) == text
    assert unparse(parse("mean( x ,start = -1 )>1E3")) == "mean(x, start=-1) > 1000.0"
