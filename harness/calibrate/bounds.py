"""Where a check's bounds are: comparisons of one statistic with constants beside it.

A check is cut into the parts of its top `and` chain, as the self-test cuts it. A part that
compares exactly one statistic (an expression that reads metrics) with constants next to it,
`mean(x, -10) > 0.55` or `0.2 < mean(x) < 0.8`, has one bound per constant; calibrate moves
those. Any other part (`all_finite(x)`, `a > b` between two statistics, an `or`, a `!=`) has no
bound and is written as it stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.selftest.probes import conjuncts
from harness.thresholds import Expr, unparse
from harness.thresholds.tree import BoolOp, Compare, Neg, Num, constant_value

VALUE_FUNCS = ("mean", "median", "min", "max", "first", "last", "percentile")  # a value of the metric
LOW, HIGH = "low", "high"  # the statistic must stay above / below the bound
# (op, is the constant right of the statistic) -> the bound's side; `==` and `!=` have none
_SIDE = {(">", True): LOW, (">=", True): LOW, ("<", True): HIGH, ("<=", True): HIGH,
         ("<", False): LOW, ("<=", False): LOW, (">", False): HIGH, (">=", False): HIGH}


@dataclass(frozen=True)
class Bound:
    """One constant of a part: where it sits in the chain, which side it guards, its value."""

    operand: int  # index in [left, *rights]
    side: str | None  # LOW, HIGH, or None for `==` (an exact check already)
    value: float


@dataclass(frozen=True)
class Part:
    """One conjunct; `statistic` is None when the part has no bound and is kept as written."""

    tree: Expr
    statistic: Expr | None = None
    bounds: tuple[Bound, ...] = ()

    @property
    def text(self) -> str:
        return unparse(self.tree)


def _operands(node: Compare) -> list[Expr]:
    return [node.left, *node.rights]


def bound_part(node: Expr) -> Part:
    """The part with its bounds, or a kept part when it is not one statistic against constants."""
    if not isinstance(node, Compare):
        return Part(node)
    operands = _operands(node)
    stats = [i for i, operand in enumerate(operands) if constant_value(operand) is None]
    if len(stats) != 1:
        return Part(node)
    at = stats[0]
    bounds = []
    for index, operand in enumerate(operands):
        if index == at:
            continue
        if abs(index - at) != 1:  # `1 < 2 < mean(x)`: a constant that bounds a constant
            return Part(node)
        op = node.ops[min(index, at)]
        if op == "!=":
            return Part(node)
        side = None if op == "==" else _SIDE[(op, index > at)]
        bounds.append(Bound(index, side, constant_value(operand)))
    return Part(node, operands[at], tuple(bounds))


def parts_of(tree: Expr) -> list[Part]:
    return [bound_part(node) for node in conjuncts(tree)]


def number(value: float) -> Expr:
    """A constant as the parser would read it: negative numbers are unary minus; whole ones ints."""
    magnitude = abs(value)
    literal = Num(int(magnitude) if float(magnitude).is_integer() and magnitude < 1e15 else magnitude)
    return Neg(literal) if value < 0 else literal


def with_bounds(part: Part, values: Sequence[float]) -> Expr:
    """The part with its constants replaced, in the order of part.bounds."""
    assert isinstance(part.tree, Compare) and len(values) == len(part.bounds), part
    operands = _operands(part.tree)
    for bound, value in zip(part.bounds, values):
        operands[bound.operand] = number(value)
    return Compare(operands[0], part.tree.ops, tuple(operands[1:]))


def exact(statistic: Expr, value: float) -> Expr:
    """`statistic == value`: tolerance 0."""
    return Compare(statistic, ("==",), (number(value),))


def joined(parts: Sequence[Expr]) -> Expr:
    """`a and b and c`, nested to the left as the parser nests it."""
    tree = parts[0]
    for part in parts[1:]:
        tree = BoolOp("and", tree, part)
    return tree
