"""Evaluate a threshold against a run's metrics, failing closed.

Every way a check could pass without evidence is a failure with a reason instead: a metric the
run never logged, a run that stopped early, a step range with no steps, a NaN or inf among the
values a function reads, a division by zero or overflow. Nothing raises out of evaluate().
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass

from harness.metrics import Metrics
from harness.thresholds.errors import ThresholdSyntaxError
from harness.thresholds.functions import APPLY, Failure, first_non_finite, select, trim
from harness.thresholds.parser import parse
from harness.thresholds.tree import (
    FUNCTIONS,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Expr,
    Neg,
    Not,
    Num,
    constant_value,
    metric_names,
    params_of,
)
from harness.thresholds.unparse import unparse

_MAX_LISTED = 12
_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """ok: the check holds. value: what the top comparison measured (its first operand that is not
    a constant), else the truth of the check.

    reason says why, for a pass too (the values compared); metrics are the names the check read.
    """

    ok: bool
    value: float | bool | None
    reason: str
    metrics: tuple[str, ...]

    @property
    def closed(self) -> bool:
        """Failed for want of evidence (a guard: NaN, no steps, a missing metric), not by its comparison."""
        return not self.ok and self.value is None


def _fmt(value: float | bool) -> str:
    return str(value) if isinstance(value, bool) else f"{value:.6g}"


def _missing(name: str, have: Mapping[str, object]) -> str:
    names = sorted(have)
    listed = ", ".join(names[:_MAX_LISTED]) + (f", ... ({len(names)} in all)" if len(names) > _MAX_LISTED else "")
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"metric {name!r} not in run{hint} (have: {listed})"


class _Evaluator:
    def __init__(self, metrics: Mapping[str, dict[int, float]]) -> None:
        self.metrics = metrics
        self.trace: list[str] = []
        self.left_value: float | bool | None = None  # of the last comparison: the top one, at the end

    def value(self, node: Expr) -> float | bool:
        if isinstance(node, Num):
            return float(node.value)
        if isinstance(node, Neg):
            return -self.value(node.operand)
        if isinstance(node, Not):
            return not self.value(node.operand)
        if isinstance(node, BoolOp):
            left, right = self.value(node.left), self.value(node.right)  # both: fail closed on either
            return (left and right) if node.op == "and" else (left or right)
        if isinstance(node, BinOp):
            return self._arith(node)
        if isinstance(node, Compare):
            return self._compare(node)
        assert isinstance(node, Call), node
        return self._call(node)

    def _arith(self, node: BinOp) -> float:
        left, right = self.value(node.left), self.value(node.right)
        if node.op == "/" and right == 0:
            raise Failure(f"division by zero: {unparse(node.right)} is 0 in {unparse(node)}")
        result = {"+": lambda: left + right, "-": lambda: left - right, "*": lambda: left * right,
                  "/": lambda: left / right}[node.op]()
        if not math.isfinite(result):
            raise Failure(f"arithmetic overflow in {unparse(node)}")
        return result

    def _compare(self, node: Compare) -> bool:
        operands = [node.left, *node.rights]
        values = [self.value(operand) for operand in operands]
        bad = next(((o, v) for o, v in zip(operands, values) if not math.isfinite(v)), None)
        if bad is not None:  # NaN compares false, inf compares: neither is evidence
            raise Failure(f"{unparse(bad[0])} is {bad[1]}, which cannot be compared")
        holds = all(_COMPARE[op](a, b) for op, a, b in zip(node.ops, values, values[1:]))
        measured = [value for operand, value in zip(operands, values) if constant_value(operand) is None]
        self.left_value = measured[0] if measured else values[0]  # `0.2 < mean(x)` measures mean(x)
        parts = [self._shown(operands[0], values[0])]
        for op, operand, value in zip(node.ops, operands[1:], values[1:]):
            parts += [op, self._shown(operand, value)]
        self.trace.append(" ".join(parts) + ("" if holds else " is false"))
        return holds

    @staticmethod
    def _shown(node: Expr, value: float | bool) -> str:
        return unparse(node) if isinstance(node, Num) else f"{unparse(node)} = {_fmt(value)}"

    def _call(self, node: Call) -> float | bool:
        if node.metric not in self.metrics:
            raise Failure(_missing(node.metric, self.metrics))
        spec = FUNCTIONS[node.func]
        bound = dict(zip(params_of(node.func), (self.value(arg) for arg in node.args)))
        bound.update((name, self.value(arg)) for name, arg in node.kwargs)
        start, end = self._step(bound, "start", 1, node), self._step(bound, "end", 0, node)
        series = self.metrics[node.metric]
        points = select(series, start, end)
        if not points:
            raise Failure(
                f"{unparse(node)}: no steps in range [{start}, {end}) "
                f"({node.metric} has steps {next(iter(series))}..{next(reversed(series))})"
            )
        if not spec.nan_ok:
            bad = first_non_finite(points)
            if bad is not None:
                raise Failure(f"{node.metric} is {bad[1]} at step {bad[0]} (read by {unparse(node)})")
        top, low = self._fraction(bound, "trim", node), self._fraction(bound, "trim_low", node)
        points = trim(points, top, low)
        if len(points) < spec.min_values:
            raise Failure(f"{unparse(node)} needs at least {spec.min_values} values, the range has {len(points)}")
        if "q" in bound and not 0 <= bound["q"] <= 100:
            raise Failure(f"{unparse(node)}: q = {_fmt(bound['q'])} is outside [0, 100]")
        result = APPLY[node.func](points, bound)
        if node.func == "all_finite":
            bad = first_non_finite(points)
            self.trace.append(f"{unparse(node)} = True" if bad is None else
                              f"{unparse(node)} is false: {node.metric} is {bad[1]} at step {bad[0]}")
        return result

    @staticmethod
    def _step(bound: dict[str, float], name: str, default: int, node: Call) -> int:
        value = bound.get(name, default)
        if not float(value).is_integer():
            raise Failure(f"{unparse(node)}: {name} = {_fmt(value)} is not a whole step")
        return int(value)

    @staticmethod
    def _fraction(bound: dict[str, float], name: str, node: Call) -> float:
        value = bound.get(name, 0.0)
        if not 0 <= value < 1:
            raise Failure(f"{unparse(node)}: {name} = {_fmt(value)} is outside [0, 1)")
        return value


def evaluate(expr: str | Expr, metrics: Mapping[str, dict[int, float]], *, expected_steps: int | None) -> Evaluation:
    """Evaluate a check (text or parsed tree) against metric -> {step: value} series.

    expected_steps: the steps the recipe asked for; a run whose last step is below it fails,
    so a truncated run can never pass on the steps it did log. None skips that guard.
    """
    try:
        tree = parse(expr) if isinstance(expr, str) else expr
    except ThresholdSyntaxError as exc:
        return Evaluation(ok=False, value=None, reason=f"syntax error: {exc}", metrics=())
    used = metric_names(tree)
    if not used:
        return Evaluation(ok=False, value=None, reason=f"{unparse(tree)} reads no metric: a check needs evidence",
                          metrics=())
    if not isinstance(metrics, Metrics):  # a plain mapping: order each series by step
        metrics = Metrics.from_rows({name: dict(series) for name, series in metrics.items()})
    last = metrics.last_step
    if last is None:
        return Evaluation(ok=False, value=None, reason="run has no metrics", metrics=used)
    if expected_steps is not None and last < expected_steps:
        return Evaluation(ok=False, value=None, reason=f"run stopped at step {last} of {expected_steps}", metrics=used)
    evaluator = _Evaluator(metrics)
    try:
        holds = bool(evaluator.value(tree))
        measured = evaluator.left_value if isinstance(tree, Compare) else holds
    except Failure as exc:
        return Evaluation(ok=False, value=None, reason=str(exc), metrics=used)
    except Exception as exc:  # fail closed: a check must never crash the report
        return Evaluation(ok=False, value=None, reason=f"internal error: {type(exc).__name__}: {exc}", metrics=used)
    trace = "; ".join(evaluator.trace) or f"{unparse(tree)} = {holds}"
    return Evaluation(ok=holds, value=measured, reason=("holds: " if holds else "fails: ") + trace, metrics=used)
