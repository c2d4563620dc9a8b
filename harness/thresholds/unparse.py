"""unparse: a tree back to canonical text, so that parse(unparse(tree)) == tree.

Parentheses are written only where precedence or left-associativity needs them; numbers use
Python's shortest round-tripping repr; metric names that are not bare names are double-quoted.
"""

from __future__ import annotations

from harness.thresholds.lexer import NAME
from harness.thresholds.tree import FUNCTIONS, RESERVED, BinOp, BoolOp, Call, Compare, Expr, Neg, Not, Num

_PRECEDENCE = {"or": 1, "and": 2, "not": 3, "compare": 4, "+": 5, "-": 5, "*": 6, "/": 6, "neg": 7, "atom": 8}


def _precedence(node: Expr) -> int:
    if isinstance(node, (BinOp, BoolOp)):
        return _PRECEDENCE[node.op]
    if isinstance(node, Compare):
        return _PRECEDENCE["compare"]
    if isinstance(node, Not):
        return _PRECEDENCE["not"]
    if isinstance(node, Neg):
        return _PRECEDENCE["neg"]
    return _PRECEDENCE["atom"]


def _wrapped(node: Expr, above: int) -> str:
    """node's text, in parentheses when its precedence is not above `above`."""
    text = unparse(node)
    return f"({text})" if _precedence(node) <= above else text


def metric_text(name: str) -> str:
    """A metric name as written in an expression: bare when the lexer reads it back as one name."""
    if NAME.fullmatch(name) and name not in RESERVED and name not in FUNCTIONS:
        return name
    assert '"' not in name and "\\" not in name, name
    return f'"{name}"'


def _number(value: float | int) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def unparse(node: Expr) -> str:
    """Canonical text of a tree."""
    if isinstance(node, Num):
        return _number(node.value)
    if isinstance(node, Neg):
        return "-" + _wrapped(node.operand, _PRECEDENCE["neg"] - 1)
    if isinstance(node, Not):
        return "not " + _wrapped(node.operand, _PRECEDENCE["not"] - 1)
    if isinstance(node, (BinOp, BoolOp)):
        level = _PRECEDENCE[node.op]
        return f"{_wrapped(node.left, level - 1)} {node.op} {_wrapped(node.right, level)}"
    if isinstance(node, Compare):
        level = _PRECEDENCE["compare"]
        parts = [_wrapped(node.left, level)]
        for op, right in zip(node.ops, node.rights):
            parts += [op, _wrapped(right, level)]
        return " ".join(parts)
    assert isinstance(node, Call), node
    args = [metric_text(node.metric), *(unparse(arg) for arg in node.args)]
    args += [f"{name}={unparse(value)}" for name, value in node.kwargs]
    return f"{node.func}({', '.join(args)})"
