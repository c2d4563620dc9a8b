"""Judge one run dir: completion, thresholds and invariants, in that order, all fail-closed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import yaml

from harness.checks.completion import check_completion
from harness.checks.invariants import check_invariants, read_invariants, required_checks
from harness.checks.verdict import Verdict
from harness.errors import UsageError
from harness.metrics import Metrics, MetricsError, read_metrics
from harness.thresholds import ThresholdCheck, evaluate, load_thresholds


@dataclass(kw_only=True)
class Judgement:
    """Everything a report needs about one judged run."""

    verdicts: list[Verdict]
    metrics: Metrics
    recipe: dict | None
    status: dict | None
    thresholds: list[ThresholdCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.verdicts) and all(v.ok for v in self.verdicts)


def read_status(run_dir: Path) -> dict | None:
    path = run_dir / "status.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UsageError(f"{path}: status.json is not valid JSON") from None


def read_run_recipe(run_dir: Path) -> dict | None:
    path = run_dir / "recipe.yaml"
    if not path.exists():
        return None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a resolved recipe")
    return data


def threshold_verdicts(checks: list[ThresholdCheck], metrics: Metrics, expected_steps: int | None) -> list[Verdict]:
    verdicts = []
    for check in checks:
        result = evaluate(check.tree, metrics, expected_steps=expected_steps)
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
    status = read_status(run_dir) if is_dir else None
    try:
        metrics = read_metrics(target)
    except MetricsError as error:
        if not is_dir:
            raise
        # A run dir without readable metrics is a failed run (exit 1), not bad input (exit 2).
        metrics = Metrics(series={}, source=str(target), notes=(f"unreadable: {error}",))
    checks_cfg: Mapping = (recipe or {}).get("checks", {})
    if expected_steps is None and recipe is not None:
        expected_steps = int(recipe["algorithm"]["num_steps"])
    thresholds_path = thresholds or (Path(checks_cfg["thresholds"]) if checks_cfg.get("thresholds") else None)
    hardware = hardware or checks_cfg.get("hardware")

    verdicts: list[Verdict] = []
    if is_dir:
        if expected_steps is None:
            verdicts.append(Verdict(name="run_completed", kind="completion", ok=False,
                                    message="the step count is unknown: no recipe.yaml in the run dir (give --steps)"))
        else:
            steps = set().union(*(series.keys() for series in metrics.values()))
            repeated = tuple(note for note in metrics.notes if "logged again" in note)
            verdicts.append(check_completion(status=status, steps=steps, expected_steps=expected_steps,
                                             repeated=repeated))
    checks: list[ThresholdCheck] = []
    if thresholds_path is None:
        verdicts.append(Verdict(name="thresholds", kind="threshold", ok=False,
                                message="no thresholds file: the recipe names none (checks.thresholds) and none was given"))
    else:
        checks = load_thresholds(thresholds_path, hardware=hardware)
        if not checks:
            verdicts.append(Verdict(name="thresholds", kind="threshold", ok=False,
                                    message=f"{thresholds_path.name} has no check for hardware {hardware!r}"))
        verdicts.extend(threshold_verdicts(checks, metrics, expected_steps))
    if recipe is not None and checks_cfg.get("invariants", True) and recipe.get("engine", "rl") == "rl":
        verdicts.extend(check_invariants(read_invariants(run_dir / "invariants.jsonl"),
                                         required=required_checks(recipe)))
    return Judgement(verdicts=verdicts, metrics=metrics, recipe=recipe, status=status, thresholds=checks)
