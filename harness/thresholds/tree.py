"""The whitelisted expression tree and the table of functions it may call.

A tree holds numbers, arithmetic, comparisons, boolean logic and calls of the functions in
FUNCTIONS, whose first argument is always a metric name. Nothing else can be represented, so an
evaluator over it can only compute statistics of step series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Num:
    value: float | int


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Expr


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


@dataclass(frozen=True, slots=True)
class BinOp:
    """Arithmetic: op is one of + - * /."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class BoolOp:
    """op is 'and' or 'or'; chains nest to the left, like arithmetic."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Compare:
    """A chain `a < b <= c` means `a < b and b <= c`, as in Python and the reference's checks."""

    left: Expr
    ops: tuple[str, ...]
    rights: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Call:
    """func(metric, *args, **kwargs); args and kwargs are numeric expressions, kept as written."""

    func: str
    metric: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()


Expr = Num | Neg | Not | BinOp | BoolOp | Compare | Call

ARITH_OPS = ("+", "-", "*", "/")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
BOOL_OPS = ("and", "or")
RESERVED = frozenset({"and", "or", "not"})


@dataclass(frozen=True, kw_only=True)
class FunctionSpec:
    """extra: required numeric parameters after the metric; returns: 'num' or 'bool'.

    nan_ok: the function looks at NaN/inf itself (all_finite, count) instead of failing on them.
    min_values: fewer values than this after range and trimming is a failure.
    """

    extra: tuple[str, ...] = ()
    returns: str = "num"
    nan_ok: bool = False
    min_values: int = 1


RANGE_PARAMS = ("start", "end", "trim", "trim_low")
FUNCTIONS: dict[str, FunctionSpec] = {
    "mean": FunctionSpec(),
    "median": FunctionSpec(),
    "min": FunctionSpec(),
    "max": FunctionSpec(),
    "first": FunctionSpec(),
    "last": FunctionSpec(),
    "std": FunctionSpec(min_values=2),
    "slope": FunctionSpec(min_values=2),
    "percentile": FunctionSpec(extra=("q",)),
    "ratio_above": FunctionSpec(extra=("x",)),
    "count": FunctionSpec(nan_ok=True),
    "all_finite": FunctionSpec(returns="bool", nan_ok=True),
}


def params_of(func: str) -> tuple[str, ...]:
    """Parameter names after the metric, in positional order."""
    return FUNCTIONS[func].extra + RANGE_PARAMS


def type_of(node: Expr) -> str:
    """'num' or 'bool': the parser keeps trees well-typed, so this is a plain lookup."""
    if isinstance(node, (Num, Neg, BinOp)):
        return "num"
    if isinstance(node, Call):
        return FUNCTIONS[node.func].returns
    return "bool"


def constant_value(node: Expr) -> float | None:
    """The value of a call-free numeric expression (for checks at parse time), else None."""
    if isinstance(node, Num):
        return float(node.value)
    if isinstance(node, Neg):
        inner = constant_value(node.operand)
        return None if inner is None else -inner
    if isinstance(node, BinOp):
        left, right = constant_value(node.left), constant_value(node.right)
        if left is None or right is None or (node.op == "/" and right == 0):
            return None
        value = {"+": left + right, "-": left - right, "*": left * right}.get(node.op)
        value = left / right if value is None else value
        return value if math.isfinite(value) else None
    return None


def metric_names(node: Expr) -> tuple[str, ...]:
    """The metrics an expression reads, in order of first appearance."""
    seen: dict[str, None] = {}
    stack = [node]
    order: list[Call] = []
    while stack:
        item = stack.pop()
        if isinstance(item, Call):
            order.append(item)
            stack.extend(reversed([*item.args, *(value for _, value in item.kwargs)]))
        elif isinstance(item, (Neg, Not)):
            stack.append(item.operand)
        elif isinstance(item, (BinOp, BoolOp)):
            stack.extend((item.right, item.left))
        elif isinstance(item, Compare):
            stack.extend(reversed((item.left, *item.rights)))
    for call in order:
        seen.setdefault(call.metric, None)
    return tuple(seen)
