"""Judge one run dir: completion, thresholds and invariants, in that order, all fail-closed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.checks.completion import check_completion
from harness.checks.coverage import coverage_gap
from harness.checks.invariants import InvariantsError, check_invariants, read_invariants, required_checks
from harness.checks.run_files import StatusError, read_run_recipe, read_status
from harness.checks.verdict import Verdict
from harness.errors import UsageError
from harness.metrics import Metrics, MetricsError, read_metrics
from harness.thresholds import Evaluation, ThresholdCheck, evaluate, load_thresholds, metric_names


@dataclass(kw_only=True)
class Judgement:
    """Everything a report needs about one judged run."""

    verdicts: list[Verdict]
    metrics: Metrics
    recipe: dict | None
    status: dict | None
    thresholds: list[ThresholdCheck] = field(default_factory=list)
    expected_steps: int | None = None
    hardware: str | None = None
    invariant_records: list[dict] | None = None  # None: invariants not judged, or unreadable
    required_invariants: tuple[str, ...] = ()
    variants: dict[str, Metrics] = field(default_factory=dict)  # a parity run's: variant name -> its metrics

    @property
    def ok(self) -> bool:
        return bool(self.verdicts) and all(v.ok for v in self.verdicts)


def judge_threshold(check: ThresholdCheck, metrics: Metrics, expected_steps: int | None) -> Evaluation:
    """The one way a threshold check is judged: complete series first, then its expression."""
    gap = coverage_gap(metrics, metric_names(check.tree), expected_steps=expected_steps)
    if gap is not None:
        return Evaluation(ok=False, value=None, reason=gap, metrics=metric_names(check.tree))
    return evaluate(check.tree, metrics, expected_steps=expected_steps)


def threshold_verdicts(checks: list[ThresholdCheck], metrics: Metrics, expected_steps: int | None) -> list[Verdict]:
    verdicts = []
    for check in checks:
        result = judge_threshold(check, metrics, expected_steps)
        value = result.value if isinstance(result.value, (int, float)) and not isinstance(result.value, bool) else None
        verdicts.append(Verdict(
            name=check.name, kind="threshold", ok=result.ok, message=result.reason,
            value=None if value is None else float(value), expr=check.expr,
            metrics=tuple(result.metrics), why=check.why, since=str(check.since),
        ))
    return verdicts


def judge_run(
    target: Path,
    *,
    thresholds: Path | None = None,
    hardware: str | None = None,
    expected_steps: int | None = None,
) -> Judgement:
    """Judge a run dir, or a bare metrics file of another engine.

    A run dir needs its recipe.yaml (or `expected_steps`) so that a truncated run fails.
    """
    if not target.exists():
        raise UsageError(f"{target}: no such run dir or metrics file")
    is_dir = target.is_dir()
    run_dir = target if is_dir else target.parent
    recipe = read_run_recipe(run_dir) if is_dir else None
    status, status_error = _status(run_dir) if is_dir else (None, None)
    metrics, metrics_error = _metrics(target, is_dir)
    checks_cfg: Mapping = (recipe or {}).get("checks", {})
    if expected_steps is None and recipe is not None:
        expected_steps = recipe["algorithm"]["num_steps"]
    thresholds_path = thresholds or (Path(checks_cfg["thresholds"]) if checks_cfg.get("thresholds") else None)
    hardware = hardware or checks_cfg.get("hardware")

    verdicts: list[Verdict] = []
    if metrics_error is not None:
        verdicts.append(Verdict(name="metrics_readable", kind="completion", ok=False, message=metrics_error))
    if is_dir:
        if status_error is not None:
            verdicts.append(Verdict(name="run_completed", kind="completion", ok=False, message=status_error))
        elif expected_steps is None:
            verdicts.append(Verdict(name="run_completed", kind="completion", ok=False,
                                    message="the step count is unknown: no recipe.yaml in the run dir (give --steps)"))
        else:
            log = run_dir / "engine.log"
            verdicts.append(check_completion(status=status, steps=metrics.logged_steps(),
                                             expected_steps=expected_steps, log=log if log.is_file() else None))
    checks: list[ThresholdCheck] = []
    if thresholds_path is None:
        verdicts.append(Verdict(name="thresholds", kind="threshold", ok=False,
                                message="no thresholds file: the recipe names none (checks.thresholds) "
                                        "and none was given"))
    else:
        # Another recipe's thresholds would judge this run by the wrong bar: refused (exit 2).
        checks = load_thresholds(thresholds_path, hardware=hardware, recipe=(recipe or {}).get("name"))
        if not checks:
            verdicts.append(Verdict(name="thresholds", kind="threshold", ok=False,
                                    message=f"{thresholds_path.name} has no check for hardware {hardware!r}"))
        verdicts.extend(threshold_verdicts(checks, metrics, expected_steps))
    records: list[dict] | None = None
    required: tuple[str, ...] = ()
    if recipe is not None and checks_cfg.get("invariants", True) and recipe.get("engine", "rl") == "rl":
        required = tuple(required_checks(recipe))
        records, invariant_verdicts = _invariant_verdicts(run_dir, required)
        verdicts.extend(invariant_verdicts)
    return Judgement(verdicts=verdicts, metrics=metrics, recipe=recipe, status=status, thresholds=checks,
                     expected_steps=expected_steps, hardware=hardware, invariant_records=records,
                     required_invariants=required)


def _status(run_dir: Path) -> tuple[dict | None, str | None]:
    try:
        return read_status(run_dir), None
    except StatusError as error:
        return None, str(error)


def _metrics(target: Path, is_dir: bool) -> tuple[Metrics, str | None]:
    """The run's metrics and why they are not a clean series (None when they are).

    A run dir whose metrics cannot be read, or were torn, is a failed run (exit 1), not bad input.
    """
    try:
        metrics = read_metrics(target)
    except MetricsError as error:
        if not is_dir:
            raise
        return Metrics(series={}, source=str(target)), f"metrics unreadable: {error}"
    if metrics.notes:
        return metrics, f"metrics not clean: {metrics.notes[0]}"
    return metrics, None


def _invariant_verdicts(run_dir: Path, required: tuple[str, ...]) -> tuple[list[dict] | None, list[Verdict]]:
    """The records of invariants.jsonl (None when unreadable) and their verdicts."""
    try:
        records = read_invariants(run_dir / "invariants.jsonl")
    except InvariantsError as error:
        return None, [Verdict(name="invariant:file", kind="invariant", ok=False, message=str(error))]
    return records, check_invariants(records, required=list(required))
