"""The `harness` command end to end on synthetic run dirs: verdicts, exit codes, outputs."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.commands.run import write_inputs
from harness.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]


def write_run(run_dir: Path, *, steps: int = 5, planned: int = 5, state: str = "completed", reward=None,
              invariants=True, thresholds: str | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    reward = reward or (lambda s: 0.1 * s)
    with (run_dir / "metrics.jsonl").open("w") as f:
        for s in range(1, steps + 1):
            f.write(json.dumps({"step": s, "train/reward": reward(s), "train/loss": 1.0 / s}) + "\n")
    (run_dir / "status.json").write_text(json.dumps({"state": state, "exit_code": 0, "last_step": steps,
                                                     "num_steps": planned, "wall_s": 3.0}))
    if invariants:
        (run_dir / "invariants.jsonl").write_text(
            "".join(json.dumps({"check": "flops_fields", "ok": True, "step": s}) + "\n" for s in range(1, steps + 1)))
    th = run_dir.parent / "thresholds.yaml"
    th.write_text(thresholds or yaml.safe_dump({"recipe": "r", "checks": [
        {"name": "reward_high", "expr": "mean(train/reward, -2) > 0.3", "why": "test", "since": "2026-11-30"},
        {"name": "loss_finite", "expr": "all_finite(train/loss)", "why": "test", "since": "2026-11-30"},
    ]}))
    recipe = {"name": "r", "engine": "rl", "algorithm": {"num_steps": planned}, "data_plane": {"backend": "legacy"},
              "env": {}, "checks": {"thresholds": str(th), "hardware": None, "invariants": True}}
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return run_dir


def test_check_passes_a_good_run_and_writes_reports(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    assert main(["check", str(run)]) == 0
    out = capsys.readouterr().out
    assert "PASS: 4 of 4 checks passed" in out
    result = json.loads((run / "result.json").read_text())
    assert result["ok"] is True
    cases = ET.parse(run / "junit.xml").getroot().iter("testcase")
    assert {c.get("name") for c in cases} >= {"reward_high", "loss_finite", "run_completed"}
    report = (run / "report.md").read_text()
    assert "reward_high" in report and (run / "plots").is_dir()


def test_check_fails_a_truncated_run_with_exit_1(tmp_path, capsys):
    run = write_run(tmp_path / "run", steps=3, planned=5, state="failed")
    assert main(["check", str(run)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "run stopped at step 3 of 5" in out


def test_check_fails_when_no_invariant_was_recorded(tmp_path, capsys):
    run = write_run(tmp_path / "run", invariants=False)
    assert main(["check", str(run)]) == 1
    assert "invariants.jsonl is missing or empty" in capsys.readouterr().out


def test_check_of_a_reference_metrics_file(tmp_path, capsys):
    data = {"train/reward": {str(s): 0.1 * s for s in range(1, 11)}}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(data))
    th = tmp_path / "t.yaml"
    th.write_text(yaml.safe_dump({"recipe": "ext", "checks": [
        {"name": "max_reward", "expr": "max(train/reward) > 0.5", "why": "x", "since": "2026-11-30"}]}))
    assert main(["check", str(path), "--thresholds", str(th)]) == 0
    assert (tmp_path / "result.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "does/not/exist"], "no such run dir"),
        (["compare", "a", "b"], "no such run dir"),
        (["show", "missing.yaml"], "missing.yaml"),
        (["validate", "nowhere"], "no such file or folder"),
        (["run", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) if argv[0] == "run" else _nothing():
        code = main(argv)
        assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_bad_threshold_file_is_exit_2(tmp_path, capsys):
    run = write_run(tmp_path / "run", thresholds="recipe: r\nchecks:\n  - name: x\n    expr: '__import__(1)'\n"
                                                 "    why: w\n    since: 2026-11-30\n")
    assert main(["check", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_compare_names_the_first_divergence(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", reward=lambda s: 0.1 * s + (0.5 if s == 4 else 0.0))
    assert main(["compare", str(a), str(a)]) == 1  # no logprob digest: parity cannot be shown
    assert main(["compare", str(a), str(b)]) == 1
    assert "first divergence at step 4, train/reward" in capsys.readouterr().out


def test_check_imports_neither_torch_nor_ray(tmp_path):
    run = write_run(tmp_path / "run")
    code = ("import sys; from harness.cli import main; rc = main(['check', %r]); "
            "bad = [m for m in ('torch', 'ray', 'rl', 'transformers') if m in sys.modules]; "
            "print('LOADED', bad); sys.exit(rc)") % str(run)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout


def test_validate_all_recipes_passes():
    assert main(["validate", str(REPO / "recipes")]) == 0


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    """Issue 35: a dry run left a run dir (recipe.yaml, plan.json) that looked like a real run's."""
    out = tmp_path / "dry"
    assert main(["run", str(REPO / "recipes" / "qwen3_5_35b.yaml"), "--dry-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "world 16" in printed and "EP 16" in printed and "would launch" in printed
    assert f"run dir {out} (not made: dry run)" in printed and "nothing written" in printed
    assert not out.exists()
    out.mkdir()  # an empty --out a real run could use stays as it was
    assert main(["run", str(REPO / "recipes" / "qwen3_5_35b.yaml"), "--dry-run", "--out", str(out)]) == 0
    assert list(out.iterdir()) == []


def test_plan_prints_and_writes_a_file_only_to_out(tmp_path, monkeypatch, capsys):
    """Issue 35: `harness plan` wrote ./plan.json by default, and one was committed by accident."""
    monkeypatch.chdir(tmp_path)
    recipe = str(REPO / "recipes" / "qwen3_5_35b.yaml")
    assert main(["plan", recipe]) == 0
    printed = capsys.readouterr().out
    assert "world 16" in printed and "wrote" not in printed
    assert list(tmp_path.iterdir()) == []
    assert main(["plan", recipe, "--out", "mine.json"]) == 0
    assert "wrote mine.json" in capsys.readouterr().out
    assert json.loads((tmp_path / "mine.json").read_text())["world"] == 16
    assert [p.name for p in tmp_path.iterdir()] == ["mine.json"]


def test_run_rejects_a_bad_plan_before_launch(tmp_path, capsys):
    out = tmp_path / "never"
    code = main(["run", str(REPO / "recipes" / "qwen3_5_35b.yaml"), "policy.parallel.ep=12", "--out", str(out)])
    assert code == 2
    assert "policy.parallel.ep = 12" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("body,message", [
    ('recipe: arith_grpo_cpu\nchecks:\n  - {name: x, expr: "mean(train/reward, -10) >", why: w, since: 2026-12-01}\n',
     "bad.yaml:3: check 'x': expected a number"),
    ('recipe: arith_grpo_cpu\nchecks:\n  - {name: x, expr: "max(train/reward) > 0", why: w, since: 2026-12-01,'
     ' hardware: [h200]}\n', "bad.yaml"),
    ('recipe: arith_grpo_cpu\nchecks:\n  - {name: x, expr: "max(train/rewrd) > 0", why: w, since: 2026-12-01}\n',
     "bad.yaml:3: check 'x' reads train/rewrd, which this run does not write: the engine's grpo runs write no "
     "such metric; did you mean train/reward?"),
    ('recipe: arith_grpo_cpu\nchecks:\n  - {name: x, expr: "max(train/ref_kl) < 1", why: w, since: 2026-12-01}\n',
     "algorithm.loss.kl_beta is 0, so the engine runs no reference pass"),
])
@pytest.mark.parametrize("dry", [True, False])
def test_run_refuses_a_thresholds_file_that_cannot_judge_it_before_launch(tmp_path, capsys, body, message, dry):
    bad, out = tmp_path / "bad.yaml", tmp_path / "never"
    bad.write_text(body)
    argv = ["run", str(REPO / "recipes" / "arith_grpo_cpu.yaml"), f"checks.thresholds={bad}", "--out", str(out)]
    assert main(argv + (["--dry-run"] if dry else [])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_a_run_dir_without_metrics_fails_with_exit_1(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    (run / "metrics.jsonl").unlink()
    assert main(["check", str(run)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "miss 5 of 5 steps" in out


def test_compare_says_how_the_recipes_differ(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b")
    recipe = yaml.safe_load((b / "recipe.yaml").read_text())
    recipe["data_plane"]["backend"] = "tq"
    recipe["algorithm"]["seed"] = 7
    (b / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    main(["compare", str(a), str(b)])
    assert "recipes differ in: algorithm.seed, data_plane.backend" in capsys.readouterr().out


def test_resume_without_a_recipe_takes_the_runs_own_and_another_names_what_differs(tmp_path, monkeypatch, capsys):
    """Issue 35 item 5: the README form `harness run --resume --out DIR` was refused as "another
    recipe" without saying which key differed."""
    import harness.commands.run as run_command

    out = tmp_path / "run"
    out.mkdir()  # what a run writes before its engine starts
    write_inputs(out, load_recipe(REPO / "recipes" / "arith_grpo_cpu.yaml", ["algorithm.num_steps=3"]).data, {})
    seen = {}
    monkeypatch.setattr(run_command, "_run_locked", lambda args, recipe, recipe_path, *rest, **kw: seen.update(
        path=recipe_path, steps=recipe["algorithm"]["num_steps"]) or 0)
    assert main(["run", "--resume", "--out", str(out)]) == 0
    assert seen == {"path": out / "recipe.yaml", "steps": 3}
    assert ("holds no checkpoint (it saves one every 25 steps and after its last, checkpoint.every_steps): the "
            "engine starts again at step 1") in capsys.readouterr().err  # said, not silent
    (out / "checkpoints" / "step_2").mkdir(parents=True)
    assert main(["run", "--resume", "--out", str(out)]) == 0
    assert "no checkpoint" not in capsys.readouterr().err
    assert main(["run", str(REPO / "recipes" / "arith_grpo_cpu.yaml"), "--resume", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "algorithm.num_steps: 3 there, 100 here" in err, err
    assert f"harness run {out / 'recipe.yaml'} --resume --out {out}" in err


def test_an_interrupted_run_prints_its_resume_command(tmp_path, monkeypatch, capsys):
    import types

    import harness.commands.run as run_command
    from harness.launch import LaunchResult

    stopped = LaunchResult(state="interrupted", exit_code=130, wall_s=1.0, last_step=2, error="Ctrl-C")
    monkeypatch.setattr(run_command, "run_single", lambda *a, **k: (
        types.SimpleNamespace(verdicts=[], ok=False, hardware="cpu"), stopped))
    monkeypatch.setattr(run_command, "write_outputs", lambda *a, **k: None)
    out = tmp_path / "run"
    code = main(["run", str(REPO / "recipes" / "arith_grpo_cpu.yaml"), "checkpoint.every_steps=1", "--out", str(out),
                 "--history", str(tmp_path / "history.sqlite")])
    err = capsys.readouterr().err
    assert code == 130 and (f"resume it: harness run {out / 'recipe.yaml'} --resume --out {out} (no checkpoint yet: "
                            "it saves one after every step; it would start again at step 1)\n") in err, err


def test_an_interrupted_run_names_the_checkpoint_it_resumes_from(tmp_path, monkeypatch, capsys):
    import types

    import harness.commands.run as run_command
    from harness.launch import LaunchResult

    def stopped_after_a_checkpoint(recipe, run_dir, **kw):
        for step in (25, 50):
            (run_dir / "checkpoints" / f"step_{step}").mkdir(parents=True)
        return (types.SimpleNamespace(verdicts=[], ok=False, hardware="cpu"),
                LaunchResult(state="interrupted", exit_code=130, wall_s=1.0, last_step=61, error="Ctrl-C"))

    monkeypatch.setattr(run_command, "run_single", stopped_after_a_checkpoint)
    monkeypatch.setattr(run_command, "write_outputs", lambda *a, **k: None)
    out = tmp_path / "run"
    code = main(["run", str(REPO / "recipes" / "arith_grpo_cpu.yaml"), "--out", str(out), "--no-history"])
    err = capsys.readouterr().err
    assert code == 130 and f"--resume --out {out} (from its checkpoint at step 50)\n" in err, err


def test_newest_checkpoint_reads_checkpoint_dir_and_says_when_a_recipe_saves(tmp_path):
    from harness.commands.run import checkpoint_policy, newest_checkpoint

    elsewhere = tmp_path / "shared"
    for name in ("step_3", "step_12", ".step_20.99.tmp", "step_x"):
        (elsewhere / name).mkdir(parents=True)
    assert newest_checkpoint(tmp_path / "run", {"checkpoint": {"dir": str(elsewhere)}}) == 12
    assert newest_checkpoint(tmp_path / "run", {"checkpoint": {}}) is None
    assert checkpoint_policy({"checkpoint": {"every_steps": 0}}) == "it saves one only after its last step"
    assert checkpoint_policy({"checkpoint": {"every_steps": 0, "at_end": False}}) == \
        "it saves none (checkpoint.at_end: false)"
    assert checkpoint_policy({"checkpoint": {"every_steps": 10, "at_end": False}}) == "it saves one every 10 steps"


def test_checkpoint_dir_is_relative_to_the_recipe_file(tmp_path):
    """The engine runs in the repository root: a relative checkpoint.dir must mean the same folder to both."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"defaults: {REPO / 'recipes' / 'arith_grpo_cpu.yaml'}\ncheckpoint: {{dir: ckpts}}\n")
    assert load_recipe(recipe).data["checkpoint"]["dir"] == str(tmp_path / "ckpts")

