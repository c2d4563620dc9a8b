"""Translate one reference check (a Python expression the reference `eval`s) into our language.

The text is parsed with `ast.parse(mode="eval")` and walked; nothing is evaluated. Only the
forms the reference's check script gives meaning to are translated:

* `mean(data["m"], a, b)`, `median(...)` -> `mean(m, a, b)` (`ignore_top_p=` -> `trim=`,
  `range_start=` / `range_end=` -> `start=` / `end=`);
* `min(data["m"])`, `max(...)`, `ratio_above(data["m"], x)` -> `min(m, 0)`, `max(m, 0)`,
  `ratio_above(m, x, 0)`: from step 0, since the reference's read every logged step;
* `data["m"]["N"]` (one step's value) -> `first(m, N, N+1)`;
* `+ - * /`, unary minus, numbers, `and` / `or` / `not`, chained comparisons: the same.

Anything else (`abs(...)`, `data["score"]` without a step, a name, an attribute) raises
`Untranslatable` with the reason. The result is parsed by our parser before it is returned,
so a translation is a check `load_thresholds` accepts.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from harness.selftest.domains import domain_of
from harness.thresholds import ThresholdSyntaxError, parse, unparse
from harness.thresholds.tree import BinOp, BoolOp, Call, Compare, Expr, Neg, Not, Num

__all__ = ["Flag", "Untranslatable", "flags_of", "translate"]

# The reference check script's functions: their parameters after the series, in order, with ours.
FUNCTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "mean": (("range_start", "start"), ("range_end", "end"), ("ignore_top_p", "trim")),
    "median": (("range_start", "start"), ("range_end", "end")),
    "min": (),
    "max": (),
    "ratio_above": (("threshold", "x"),),
}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
MAX_CHECK_CHARS = 2000


class Untranslatable(ValueError):
    """The check has no translation; the message says why, `category` says what kind of why."""

    def __init__(self, message: str, category: str = "no_counterpart"):
        super().__init__(message)
        self.category = category


def _metric(node: ast.expr) -> str:
    """`data["m"]` -> "m"."""
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "data"
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        return node.slice.value
    raise Untranslatable(f"{ast.unparse(node)}: a function reads a series, data[\"<metric>\"]", "not_a_series")


def _number(node: ast.expr) -> Expr:
    return _expr(node)


def _expr(node: ast.expr) -> Expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        if not math.isfinite(node.value):
            raise Untranslatable(f"{node.value!r}: not a finite number")
        return Num(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return Neg(_expr(node.operand))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _expr(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return Not(_expr(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return BinOp(_ARITH[type(node.op)], _expr(node.left), _expr(node.right))
    if isinstance(node, ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        out = _expr(node.values[0])
        for value in node.values[1:]:
            out = BoolOp(op, out, _expr(value))
        return out
    if isinstance(node, ast.Compare):
        ops = []
        for op in node.ops:
            if type(op) not in _CMP:
                raise Untranslatable(f"comparison {type(op).__name__}: not a numeric comparison")
            ops.append(_CMP[type(op)])
        return Compare(_expr(node.left), tuple(ops), tuple(_expr(r) for r in node.comparators))
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Subscript):
        return _step_value(node)
    raise Untranslatable(f"{ast.unparse(node)}: no counterpart in the threshold language")


def _call(node: ast.Call) -> Expr:
    name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
    if name not in FUNCTIONS:
        raise Untranslatable(f"{name}(): not a function of the reference's check script", "function")
    if not node.args:
        raise Untranslatable(f"{name}(): no series")
    metric = _metric(node.args[0])
    params = FUNCTIONS[name]
    if len(node.args) - 1 > len(params):
        raise Untranslatable(f"{name}() of the reference takes the series"
                             + (f" and at most {', '.join(p for p, _ in params)}" if params else " only"))
    args = tuple(_number(a) for a in node.args[1:])
    given = {p for p, _ in params[:len(args)]}
    ours = dict(params)
    kwargs = []
    for kw in node.keywords:
        if kw.arg not in ours or kw.arg in given:
            raise Untranslatable(f"{name}({kw.arg}=...): not a parameter of the reference's {name}()")
        given.add(kw.arg)
        kwargs.append((ours[kw.arg], _number(kw.value)))
    if name == "ratio_above" and "threshold" not in given:
        raise Untranslatable("ratio_above() needs its threshold")
    if name in ("min", "max", "ratio_above"):
        # The reference's min, max and ratio_above read every logged step, a step-0 value (a
        # validation before training) included; ours start at step 1 unless told.
        if kwargs:
            kwargs.append(("start", Num(0)))
        else:
            args = (*args, Num(0))
    return Call(name, metric, args, tuple(kwargs))


def _step_value(node: ast.Subscript) -> Expr:
    """`data["m"]["N"]` -> first(m, N, N+1); `data["m"]` alone is a series, not a number."""
    if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        raise Untranslatable(f"{ast.unparse(node)}: a step index must be a quoted step number", "no_step")
    if isinstance(node.value, ast.Name):
        raise Untranslatable(f"{ast.unparse(node)}: a whole series (or a scalar) compared as a number; "
                             "no step and no function says which value", "no_step")
    metric = _metric(node.value)
    step = node.slice.value
    if not step.isdigit() or len(step) > 12:
        raise Untranslatable(f"{ast.unparse(node)}: step {step!r} is not a step number", "no_step")
    n = int(step)
    return Call("first", metric, (Num(n), Num(n + 1)))


def translate(text: str) -> str:
    """Our expression for the reference check `text`, or Untranslatable."""
    if len(text) > MAX_CHECK_CHARS:
        raise Untranslatable(f"longer than {MAX_CHECK_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise Untranslatable(f"not a Python expression ({type(error).__name__})", "syntax") from None
    try:
        expr = _expr(tree.body)
    except RecursionError:
        raise Untranslatable("nested too deeply") from None
    out = unparse(expr)
    try:
        parse(out)
    except ThresholdSyntaxError as error:
        raise Untranslatable(f"our language refuses it: {error}", "refused_by_parser") from None
    return out


@dataclass(frozen=True)
class Flag:
    kind: str  # "cannot_fail" or "nan_guard"
    reason: str


# Domains that hold for any engine by definition. train/reward's [0, 1] in domains.py holds for
# our envs only (the reference's rewards can be negative), so it is left out here.
_ENV_DEPENDENT = {"train/reward"}
_VALUE_FUNCS = {"mean", "median", "min", "max", "first", "last", "percentile"}
NAN_GUARD_BOUND = 1e5


def _call_range(call: Call) -> tuple[float, float, str]:
    if call.func == "ratio_above":
        return 0.0, 1.0, "a fraction"
    if call.func in _VALUE_FUNCS and call.metric not in _ENV_DEPENDENT:
        d = domain_of(call.metric)
        return d.low, d.high, f"{call.metric} is in [{d.low:g}, {d.high:g}] by construction"
    return -math.inf, math.inf, ""


def _holds_always(op: str, low: float, high: float, c: float) -> bool:
    """Does `v op c` hold for every v in [low, high]?"""
    return {"<": high < c, "<=": high <= c, ">": low > c, ">=": low >= c}.get(op, False)


_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def flags_of(expr_text: str) -> list[Flag]:
    """What our self-test's logic would say of a translated check, seen without a run:
    a comparison of a bounded statistic with a constant outside its domain cannot fail, and a
    min/max against a huge bound is a NaN guard whose bound only gross changes can fail."""
    tree = parse(expr_text)
    flags: list[Flag] = []
    for call, op, c in _simple_comparisons(tree):
        low, high, why = _call_range(call)
        if _holds_always(op, low, high, c):
            flags.append(Flag("cannot_fail", f"{unparse(call)} {op} {c:g} holds for every run: {why}"))
        elif call.func in ("max", "min") and abs(c) >= NAN_GUARD_BOUND and (
                (call.func == "max" and op in ("<", "<=")) or (call.func == "min" and op in (">", ">="))):
            flags.append(Flag("nan_guard", (
                f"{unparse(call)} {op} {c:g}: a NaN guard written with {call.func}(); the reference's "
                f"{call.func} passes a NaN that is not the first value; ours fails closed on any NaN it "
                f"reads, but the bound itself fails only on a gross change (self-test: weak at best); "
                f"all_finite({call.metric}) says it directly")))
    return flags


def _simple_comparisons(node: Expr):
    """(call, op, constant) for each `call op constant` or `constant op call` link of a comparison."""
    if isinstance(node, BoolOp):
        yield from _simple_comparisons(node.left)
        yield from _simple_comparisons(node.right)
    elif isinstance(node, Not):
        return
    elif isinstance(node, Compare):
        operands = (node.left, *node.rights)
        for i, op in enumerate(node.ops):
            a, b = operands[i], operands[i + 1]
            if isinstance(a, Call) and _const(b) is not None:
                yield a, op, _const(b)
            elif isinstance(b, Call) and _const(a) is not None and op in _MIRROR:
                yield b, _MIRROR[op], _const(a)


def _const(node: Expr) -> float | None:
    if isinstance(node, Num):
        return float(node.value)
    if isinstance(node, Neg) and isinstance(node.operand, Num):
        return -float(node.operand.value)
    return None
