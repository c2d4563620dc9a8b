"""`harness calibrate` on a parity recipe: one seed is the run dir with a sub-dir per data path, each
path judged as `harness check` judges it, and the seed counted once in the spread."""

from __future__ import annotations

import shutil
from pathlib import Path

from calibrate_runs import PARITY, check, row, write_parity_run, write_recipe, write_run

from harness.checks.judge import judge_run
from harness.cli import main
from harness.thresholds import load_thresholds

SEEDS = (42, 7, 123)
CHECKS = {"recipe": "r", "checks": [check("reward_final", "mean(train/reward, -10) > 0.6", hardware=["cpu"]),
                                    check("flops_recorded", "min(total_flops) > 0 and max(num_ranks) < 9")]}


def calibrate_parity(tmp_path, *, parity=PARITY, **kwargs):
    recipe = write_recipe(tmp_path / "recipe", thresholds=CHECKS, parity=parity)
    runs = [str(write_parity_run(tmp_path / "runs" / f"seed-{seed}", seed, parity=parity, **kwargs))
            for seed in SEEDS]
    out = tmp_path / "proposed.yaml"
    return main(["calibrate", str(recipe), "--runs", *runs, "--out", str(out)]), out, runs


def test_a_parity_run_is_one_seed_and_each_of_its_paths_is_judged(tmp_path, capsys):
    code, out, runs = calibrate_parity(tmp_path)
    text = capsys.readouterr().out
    assert code == 0, text
    checks = {c.name: c for c in load_thresholds(out, hardware="cpu", recipe="r")}
    # the spread of three seeds (0.61 / 0.69 / 0.55, sd 0.0702), as for runs without variants: six
    # paths counted as seeds would make the sd 0.0628 and the bound 0.361
    assert checks["reward_final"].expr == "mean(train/reward, -10) > 0.339"
    assert "0.61 (seed 42), 0.69 (seed 7), 0.55 (seed 123)" in checks["reward_final"].why
    assert checks["flops_recorded"].expr == "min(total_flops) > 0 and max(num_ranks) == 2"
    for run in runs:  # the proof judged each path; the why cites each path's dir
        for name in ("legacy", "tq"):
            assert f"{run}/{name}" in checks["reward_final"].why
            assert judge_run(Path(run) / name, thresholds=out, hardware="cpu").ok
    assert "seed 7 tq: ok" in text
    assert "parity       legacy vs tq: bit-identical on every seed: exact, tolerance 0" in text


def test_a_recipe_that_allows_a_tolerance_is_told_its_paths_are_bit_identical(tmp_path, capsys):
    code, _, _ = calibrate_parity(tmp_path, parity={**PARITY, "tolerance": 1e-6})
    assert code == 0
    assert ("bit-identical on every seed: exact, tolerance 0; the recipe allows 1e-06 (checks.parity.tolerance) "
            "and could ask for 0") in capsys.readouterr().out


def test_paths_within_the_tolerance_place_a_bound_by_each_seeds_worst_path(tmp_path, capsys):
    def tq_rows(step, seed):
        return {**row(step, seed), "train/reward": row(step, seed)["train/reward"] - 1e-7}

    code, out, _ = calibrate_parity(tmp_path, parity={**PARITY, "tolerance": 1e-6}, tq_rows=tq_rows)
    text = capsys.readouterr().out
    assert code == 0, text
    (proposed,) = [c for c in load_thresholds(out, hardware="cpu", recipe="r") if c.name == "reward_final"]
    assert "0.61 legacy / 0.61 tq (seed 42)" in proposed.why
    assert "lowest run - max(3 sd = 0.2107, 10% of 0.69 = 0.069) = 0.55 - 0.2107" in proposed.why
    assert "legacy vs tq: not bit-identical (seed 42: first divergence at step 1, train/reward" in text
    assert "within tolerance 1e-06 on every seed" in text


def test_a_seed_whose_paths_diverge_is_no_evidence(tmp_path, capsys):
    def tq_rows(step, seed):
        return {**row(step, seed), "total_flops": 3.6e8}

    code, out, _ = calibrate_parity(tmp_path, tq_rows=tq_rows)
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "(seed 42) is no evidence to calibrate on: parity:metrics: first divergence at step 1, total_flops" in err
    assert len(err.strip().splitlines()) == 1


def test_the_paths_of_a_parity_run_given_as_runs_are_refused(tmp_path, capsys):
    recipe = write_recipe(tmp_path / "recipe", thresholds=CHECKS, parity=PARITY)
    run = write_parity_run(tmp_path / "runs" / "seed-42", 42)
    assert main(["calibrate", str(recipe), "--runs", str(run / "legacy"), str(run / "tq")]) == 2
    err = capsys.readouterr().err
    assert "legacy: one data path of a parity run, not a parity run dir" in err and f"give {run}" in err
    assert len(err.strip().splitlines()) == 1


def test_a_run_without_variants_is_refused_for_a_parity_recipe_and_the_reverse(tmp_path, capsys):
    parity_recipe = write_recipe(tmp_path / "p", thresholds=CHECKS, parity=PARITY)
    plain = [str(write_run(tmp_path / "runs" / f"plain-{seed}", seed)) for seed in (42, 7)]
    assert main(["calibrate", str(parity_recipe), "--runs", *plain]) == 2
    assert "one data path of a parity run, not a parity run dir" in capsys.readouterr().err
    recipe = write_recipe(tmp_path / "r", thresholds=CHECKS)
    paired = [str(write_parity_run(tmp_path / "runs" / f"parity-{seed}", seed)) for seed in (42, 7)]
    assert main(["calibrate", str(recipe), "--runs", *paired]) == 2
    assert "a parity run dir, and the recipe has no checks.parity" in capsys.readouterr().err


def test_a_damaged_parity_section_is_bad_input(tmp_path, capsys):
    recipe = write_recipe(tmp_path / "recipe", thresholds=CHECKS, parity=PARITY)
    runs = [write_parity_run(tmp_path / "runs" / f"seed-{seed}", seed) for seed in (42, 7)]
    text = (runs[1] / "recipe.yaml").read_text().replace("tolerance: 0.0", "tolerance: -1")
    (runs[1] / "recipe.yaml").write_text(text)
    assert main(["calibrate", str(recipe), "--runs", *map(str, runs)]) == 2
    err = capsys.readouterr().err
    assert "checks.parity must be a mapping of variants (plain names) and a tolerance >= 0" in err
    assert len(err.strip().splitlines()) == 1


def test_a_variant_dir_that_is_a_symlink_to_another_run_is_refused(tmp_path, capsys):
    recipe = write_recipe(tmp_path / "recipe", thresholds=CHECKS, parity=PARITY)
    runs = [write_parity_run(tmp_path / "runs" / f"seed-{seed}", seed) for seed in (42, 7)]
    shutil.rmtree(runs[1] / "tq")
    (runs[1] / "tq").symlink_to(runs[0] / "tq")
    assert main(["calibrate", str(recipe), "--runs", *map(str, runs)]) == 2
    assert "tq: a symlink; a parity run's variant dirs are not followed" in capsys.readouterr().err
