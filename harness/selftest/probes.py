"""Judge one check again on perturbed series, the way `harness check` judges it, and say how it
ended: it held, it failed by its own comparison, or it failed closed for want of evidence.

The difference matters: every check that reads a metric fails closed when that metric is NaN,
missing or cut short (the evaluator's guards do that), so such a failure proves the guards, not
the threshold. Only a failure by the check's own logic proves that the check can fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from harness.checks.completion import check_completion
from harness.checks.invariants import check_invariants
from harness.checks.judge import Judgement, judge_threshold
from harness.checks.verdict import Verdict
from harness.metrics import Metrics
from harness.thresholds import Expr, ThresholdCheck, metric_names, unparse
from harness.thresholds.tree import BoolOp

HOLDS, FAILS, CLOSED = "holds", "fails", "fails closed"
RANK = {FAILS: 2, CLOSED: 1, HOLDS: 0}  # which outcome says most about a check


@dataclass(frozen=True)
class Outcome:
    result: str  # HOLDS, FAILS or CLOSED
    reason: str


Probe = Callable[[Metrics, list[dict]], Outcome]


def threshold_probe(check: ThresholdCheck, expected_steps: int | None) -> Probe:
    def probe(metrics: Metrics, records: list[dict]) -> Outcome:
        result = judge_threshold(check, metrics, expected_steps)
        return Outcome(HOLDS if result.ok else CLOSED if result.closed else FAILS, result.reason)
    return probe


def completion_probe(status: Mapping, expected_steps: int) -> Probe:
    def probe(metrics: Metrics, records: list[dict]) -> Outcome:
        steps = set().union(*(series.keys() for series in metrics.values()))
        verdict = check_completion(status=status, steps=steps, expected_steps=expected_steps)
        return Outcome(HOLDS if verdict.ok else FAILS, verdict.message)
    return probe


def invariant_probe(name: str, required: tuple[str, ...]) -> Probe:
    def probe(metrics: Metrics, records: list[dict]) -> Outcome:
        verdict = next((v for v in check_invariants(records, required=list(required)) if v.name == name), None)
        if verdict is None:
            return Outcome(HOLDS, f"no {name} verdict: the run recorded no such check and needs none")
        return Outcome(HOLDS if verdict.ok else FAILS, verdict.message)
    return probe


@dataclass(frozen=True)
class Target:
    """What to perturb: a check, or one part of a check that is a conjunction.

    A part is tested on its own because `a and b` fails whenever b fails: a part `a` that cannot
    fail would hide behind b and read as coverage. text: the part's expression (None: the whole).
    """

    probe: Probe
    reads: tuple[str, ...]
    text: str | None = None


def conjuncts(tree: Expr) -> list[Expr]:
    """The parts of an `and` chain (the tree itself when it is not one)."""
    if isinstance(tree, BoolOp) and tree.op == "and":
        return conjuncts(tree.left) + conjuncts(tree.right)
    return [tree]


def _threshold_targets(check: ThresholdCheck, expected_steps: int | None) -> list[Target]:
    parts = conjuncts(check.tree)
    if len(parts) == 1:
        return [Target(threshold_probe(check, expected_steps), metric_names(check.tree))]
    return [Target(threshold_probe(replace(check, tree=part, expr=unparse(part)), expected_steps),
                   metric_names(part), unparse(part)) for part in parts]


def targets_for(verdict: Verdict, judgement: Judgement) -> list[Target]:
    """How to judge this (passing) verdict again; [] for a verdict no perturbation reaches."""
    if verdict.kind == "threshold":
        check = next((c for c in judgement.thresholds if c.name == verdict.name), None)
        return [] if check is None else _threshold_targets(check, judgement.expected_steps)
    if verdict.kind == "completion" and judgement.status is not None and judgement.expected_steps is not None:
        return [Target(completion_probe(judgement.status, judgement.expected_steps), ())]
    if verdict.kind == "invariant" and judgement.invariant_records is not None:
        return [Target(invariant_probe(verdict.name, judgement.required_invariants), ())]
    return []
