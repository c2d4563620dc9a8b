"""The self-test of checks: a check no perturbation fails is flagged, every shipped check can fail."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest
import yaml

from harness.checks.completion import check_completion
from harness.checks.invariants import check_invariants
from harness.checks.judge import Judgement, threshold_verdicts
from harness.cli import main
from harness.commands.validate import self_test_cited
from harness.history import HistoryRow, append
from harness.metrics import Metrics
from harness.selftest import CANNOT_FAIL, FAILS_AS_IS, OK, WEAK, run_to_run_sd, self_test
from harness.thresholds import ThresholdCheck, load_thresholds, parse

REPO = Path(__file__).resolve().parents[2]
STEPS = 20


def done(steps: int) -> dict:
    return {"state": "completed", "exit_code": 0, "error": None, "dead_worker": None,
            "last_step": steps, "num_steps": steps}


def judged(checks: list[ThresholdCheck] | dict[str, str], series: dict[str, list[float]], *,
           records: list[dict] | None = None) -> Judgement:
    """A run judged in memory, as judge_run would judge it from a run dir."""
    if isinstance(checks, dict):
        checks = [ThresholdCheck(name=name, expr=expr, tree=parse(expr), why="test", since=dt.date(2026, 11, 30),
                                 hardware=None, path="t.yaml", line=1) for name, expr in checks.items()]
    metrics = Metrics.from_rows({name: dict(enumerate(values, 1)) for name, values in series.items()})
    steps = metrics.last_step
    verdicts = [check_completion(status=done(steps), steps=set(range(1, steps + 1)), expected_steps=steps)]
    verdicts += threshold_verdicts(checks, metrics, steps)
    required = ("flops_fields",) if records is not None else ()
    verdicts += check_invariants(records, required=list(required)) if records is not None else []
    return Judgement(verdicts=verdicts, metrics=metrics, recipe=None, status=done(steps), thresholds=checks,
                     expected_steps=steps, invariant_records=records, required_invariants=required)


def by_name(judgement: Judgement, **kwargs) -> dict:
    return {test.name: test for test in self_test(judgement, **kwargs)}


def rising(low: float, high: float) -> list[float]:
    return [low + (high - low) * i / (STEPS - 1) for i in range(STEPS)]


def test_a_lower_bound_at_the_edge_of_a_non_negative_metric_cannot_fail():
    series = {"train/gen_kl_error": [1e-9 * (1 + i % 3) for i in range(STEPS)], "x": rising(0.1, 2.0)}
    tests = by_name(judged({"kl_min": "min(train/gen_kl_error) >= 0", "std": "std(x) >= 0",
                            "reward_max": "max(train/reward) <= 1", "x_min": "min(x) >= 0"},
                           {**series, "train/reward": rising(0.2, 0.9)}))
    assert tests["kl_min"].status == CANNOT_FAIL  # k3 >= 0 by construction: no run can fail it
    assert tests["std"].status == CANNOT_FAIL
    assert tests["reward_max"].status == CANNOT_FAIL  # rewards are 0 or 1
    assert "no perturbation fails it by its own comparison (fails closed: nan, removed, truncated)" in \
        tests["kl_min"].summary()
    # hidden in a conjunction whose other part can fail, it is still found
    hidden = by_name(judged({"both": "max(x) < 3 and min(train/gen_kl_error) >= 0"}, series))["both"]
    assert hidden.status == CANNOT_FAIL
    assert hidden.summary().startswith("part min(train/gen_kl_error) >= 0: cannot fail; failed by shift x +1")
    # the same bound on a metric of unknown domain is failed by a shift below zero
    x_min = tests["x_min"]
    assert x_min.status == OK
    shift = next(t for t in x_min.kills if t.perturbation == "shift")
    assert shift.amount == pytest.approx(-0.1, rel=1e-3)


def test_the_smallest_failing_shift_and_its_size_in_run_to_run_deviations():
    tests = by_name(judged({"reward_final": "mean(train/reward, -5) > 0.5"}, {"train/reward": [0.8] * STEPS}),
                    sd={"train/reward": 0.1})
    shift = next(t for t in tests["reward_final"].kills if t.perturbation == "shift")
    assert shift.amount == pytest.approx(-0.3, rel=1e-3) and shift.sigmas == pytest.approx(3.0, rel=1e-3)
    scale = next(t for t in tests["reward_final"].kills if t.perturbation == "scale")
    assert scale.amount == pytest.approx(0.625, rel=1e-3)
    assert "shift train/reward -0.3 (3 sd)" in tests["reward_final"].summary()


def test_each_perturbation_names_what_it_kills_and_guards_fail_closed():
    records = [{"check": "flops_fields", "ok": True, "step": s} for s in range(1, STEPS + 1)]
    tests = by_name(judged({
        "improves": "mean(train/reward, -5) - mean(train/reward, 1, 6) > 0.1",
        "loss_finite": "all_finite(train/loss)",
        "loss_bounded": "max(train/loss) < 5",
    }, {"train/reward": rising(0.2, 0.9), "train/loss": rising(3.0, 1.0)}, records=records))

    def kills(name):
        return {t.perturbation for t in tests[name].kills}

    def closed(name):
        return {t.perturbation for t in tests[name].trials if t.outcome == "fails closed"}

    assert "flat" in kills("improves")  # a run that did nothing
    assert kills("loss_finite") == {"nan"} and closed("loss_finite") == {"removed", "truncated"}
    assert "nan" in closed("loss_bounded") and "nan" not in kills("loss_bounded")
    assert kills("run_completed") == {"truncated"}
    assert kills("invariant:flops_fields") == {"invariant"}
    assert all(test.status == OK for test in tests.values())


def test_a_check_only_a_gross_change_fails_is_weak_and_a_failing_one_is_said_so():
    tests = by_name(judged({"loose": "mean(x) < 1000", "failing": "mean(x) > 5"}, {"x": rising(0.5, 1.5)}))
    assert tests["loose"].status == WEAK and tests["loose"].summary().startswith("failed only grossly by shift x +999")
    assert tests["failing"].status == FAILS_AS_IS


def healthy_run(ranks: int = 2, hardware: str | None = None) -> dict[str, list[float]]:
    """Series a sound run of any shipped recipe logs (reward rising, refit exact, FLOPs counted)."""
    length = 256.0 if hardware == "h200" else 16.0  # the perf recipes' fixed response lengths
    return {"train/mean_response_length": [length] * STEPS, "train/padding_fraction_training": [0.1] * STEPS,
            "performance/mfu": [0.1] * STEPS, "timing/train/generation": [1.0] * STEPS,
            "timing/train/training": [2.0] * STEPS, "timing/train/total": [3.5] * STEPS,
            "train/reward": rising(0.3, 0.95), "train/loss": rising(2.2, -0.1), "train/grad_norm": rising(20, 8),
            "train/gen_kl_error": [5e-9] * STEPS, "total_flops": [6e10] * STEPS, "theoretical_tflops": [100.0] * STEPS,
            "num_ranks": [float(ranks)] * STEPS, "performance/tokens_per_sec_per_gpu": [500.0] * STEPS,
            "performance/offloaded_gib": [30.0] * STEPS,  # generation.offload_training: the state's trip
            # distillation (thresholds/xtoken_distill_cpu.yaml): KL falls, the student's accuracy rises
            "train/kl_loss": [2.4 * 0.8**i for i in range(STEPS)], "train/accuracy": rising(0.28, 0.55),
            "train/proj_accuracy": rising(0.3, 0.75), "train/num_valid_chunks": [48.0] * STEPS}


@pytest.mark.parametrize("path", sorted((REPO / "thresholds").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_check_fails_under_some_perturbation(path):
    checks = load_thresholds(path, hardware=None)
    for hardware in sorted({h for check in checks for h in check.hardware or ()}) or [None]:
        selected = [c for c in checks if c.hardware is None or hardware in c.hardware]
        # a sound run has one rank (one-GPU checks) or several: each check must be shown on one of them
        by_ranks = [{t.name: t for t in self_test(judged(selected, healthy_run(ranks, hardware)))} for ranks in (1, 2)]
        for name in by_ranks[0]:
            shown = [tests[name] for tests in by_ranks if tests[name].status in (OK, WEAK) and tests[name].kills]
            assert shown, (hardware, name, [tests[name].status for tests in by_ranks])


def write_run(run_dir: Path, checks: dict[str, str]) -> Path:
    run_dir.mkdir()
    with (run_dir / "metrics.jsonl").open("w") as f:
        for step in range(1, 6):
            f.write(json.dumps({"step": step, "train/reward": 0.1 * step, "train/gen_kl_error": 1e-9}) + "\n")
    (run_dir / "status.json").write_text(json.dumps(done(5)))
    (run_dir / "invariants.jsonl").write_text(json.dumps({"check": "flops_fields", "ok": True, "step": 1}) + "\n")
    thresholds = run_dir.parent / f"{run_dir.name}.yaml"
    thresholds.write_text(yaml.safe_dump({"recipe": "r", "checks": [
        {"name": name, "expr": expr, "why": "test", "since": "2026-11-30"} for name, expr in checks.items()]}))
    recipe = {"name": "r", "engine": "rl", "algorithm": {"num_steps": 5}, "data_plane": {"backend": "legacy"},
              "env": {}, "checks": {"thresholds": str(thresholds), "hardware": None}}
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return run_dir


def test_check_self_test_exits_1_naming_a_planted_unfailable_check(tmp_path, capsys):
    sound = {"reward_final": "mean(train/reward, -2) > 0.3", "in_sync": "max(train/gen_kl_error) < 5e-9"}
    planted = write_run(tmp_path / "planted", {**sound, "kl_nonneg": "min(train/gen_kl_error) >= 0"})
    assert main(["check", str(planted), "--self-test", "--history", str(tmp_path / "none.sqlite")]) == 1
    out = capsys.readouterr().out
    assert "PASS: 5 of 5 checks passed" in out and "failed by shift train/reward -0.15" in out
    assert "self-test: 5 checks, 4 ok, 1 cannot fail; cannot be shown to fail: kl_nonneg" in out
    report = (planted / "report.md").read_text()
    assert "| self-test |" in report and "cannot fail: no perturbation" in report
    result = json.loads((planted / "result.json").read_text())
    assert {t["name"]: t["status"] for t in result["self_test"]}["kl_nonneg"] == CANNOT_FAIL
    assert not math.isnan(result["self_test"][1]["trials"][0]["amount"])


def test_run_to_run_deviation_comes_from_the_recipes_passing_runs_in_the_history(tmp_path):
    db = tmp_path / "history.sqlite"
    for reward, verdict in ((0.6, "pass"), (0.7, "pass"), (0.8, "pass"), (0.0, "fail")):
        append(db, HistoryRow(time="2026-11-30T00:00:00", suite="s", entry="e", recipe="r", recipe_path="r.yaml",
                              commit_sha=None, hardware="cpu", verdict=verdict, final_reward=reward,
                              tokens_per_s=500.0))
    assert run_to_run_sd(db, recipe="r", hardware="cpu") == {"train/reward": pytest.approx(0.1)}  # 500 x 3: no spread
    assert run_to_run_sd(db, recipe="other", hardware="cpu") == {}
    assert run_to_run_sd(tmp_path / "none.sqlite", recipe="r", hardware="cpu") == {}


def test_shipped_thresholds_pass_the_self_test_on_the_runs_they_cite(monkeypatch, capsys):
    """What `harness validate --self-test` asks on a fresh clone (issue 35: it exited 1, citing a
    run its device call had cut at step 67): every cited run is committed and passes its checks."""
    monkeypatch.chdir(REPO)  # cited run dirs are relative to the repository, like thresholds paths
    for recipe in sorted(Path("recipes").glob("*.yaml")):
        assert self_test_cited(recipe, REPO / "no-history.sqlite") == 0, recipe
    out = capsys.readouterr().out
    for seed in (42, 7, 123):
        cited = f"bench/results/runs/qwen3_5_35b-h200x2-seed{seed}-2026-11-30"
        assert f"ok   self-test thresholds/qwen3_5_35b.yaml (h200x2) on {cited}" in out
        assert f"bench/results/runs/qwen3_5_35b_vlm-h200x1-seed{seed}-2026-12-01" in out
    assert "qwen3_5_35b_vlm-h200x2-seed7" not in out  # the cut run is kept, not cited


def test_a_cited_run_is_judged_by_the_checks_that_cite_it(tmp_path, monkeypatch):
    from harness.selftest.cited import citing_checks
    from harness.thresholds import load_thresholds

    monkeypatch.chdir(tmp_path)
    for name in ("one_gpu", "two_gpus"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "status.json").write_text("{}")
    (tmp_path / "t.yaml").write_text(
        "recipe: r\nchecks:\n"
        "  - {name: a, expr: 'max(x) < 1', why: 'from runs/one_gpu and runs/two_gpus.', since: 2026-12-01}\n"
        "  - {name: b, expr: 'min(num_ranks) == 2', why: 'runs/two_gpus (2 ranks)', since: 2026-12-01}\n")
    cited = citing_checks(load_thresholds(Path("t.yaml"), hardware=None))
    assert cited == {Path("runs/one_gpu"): ["a"], Path("runs/two_gpus"): ["a", "b"]}
