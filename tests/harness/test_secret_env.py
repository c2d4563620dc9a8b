"""Secret recipe env entries (issue 18): the name pattern, pass-through, and every harness writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checks.judge import Judgement
from harness.checks.verdict import Verdict
from harness.cli import main
from harness.commands.check import write_outputs
from harness.commands.run import scrub_logs
from harness.recipe import format_show, load_recipe
from harness.recipe.errors import RecipeError
from harness.recipe.secret_env import REDACTED, is_secret, launch_env, redact_argv, redact_recipe, scrub, secret_values

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "arith_grpo_cpu.yaml"
PASSED = "sk-pass-7f3e21"
LITERAL = "hf-lit-0c9d44"
OVERRIDES = ["++env.WANDB_API_KEY={from_env: true}", f"++env.HF_TOKEN={LITERAL}", "++env.PLAIN=visible"]


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "hf_token", "AWS_SECRET", "DB_PASSWORD_FILE", "password",
                                  "Api_Key"])
def test_secret_names(name):
    assert is_secret(name, "x")


@pytest.mark.parametrize("name", ["KEYS", "TOKENIZER", "KEY_ID", "SECRETS_DIR", "PYTORCH_CUDA_ALLOC_CONF", "PLAIN"])
def test_plain_names(name):
    assert not is_secret(name, "x")


def test_pass_through_of_any_name_is_secret():
    assert is_secret("PLAIN", {"from_env": True})


def test_redact_recipe_keeps_plain_values_and_the_original():
    recipe = {"name": "r", "env": {"HF_TOKEN": LITERAL, "PLAIN": "1", "X": {"from_env": True}}}
    assert redact_recipe(recipe)["env"] == {"HF_TOKEN": REDACTED, "PLAIN": "1", "X": REDACTED}
    assert recipe["env"]["HF_TOKEN"] == LITERAL


def test_launch_env_reads_pass_through_from_the_environment():
    recipe = {"env": {"WANDB_API_KEY": {"from_env": True}, "HF_TOKEN": LITERAL}}
    assert launch_env(recipe, {"WANDB_API_KEY": PASSED}) == {"WANDB_API_KEY": PASSED, "HF_TOKEN": LITERAL}
    assert secret_values(recipe, {"WANDB_API_KEY": PASSED}) == sorted([PASSED, LITERAL], key=len, reverse=True)
    with pytest.raises(RecipeError, match="env.WANDB_API_KEY"):
        launch_env(recipe, {})


def test_scrub():
    assert scrub(f"a {PASSED} b {LITERAL}", [PASSED, LITERAL]) == f"a {REDACTED} b {REDACTED}"


def test_missing_pass_through_is_one_line_exit_2_before_a_run_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    out = tmp_path / "run"
    assert main(["run", str(RECIPE), *OVERRIDES, "--dry-run", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "WANDB_API_KEY" in err and "not set" in err
    assert not out.exists()


def test_dry_run_writes_recipe_and_plan_redacted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_API_KEY", PASSED)
    out = tmp_path / "run"
    assert main(["run", str(RECIPE), *OVERRIDES, "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for path in out.rglob("*"):
        assert PASSED not in path.read_text() and LITERAL not in path.read_text(), path
    assert PASSED not in text and LITERAL not in text
    assert "WANDB_API_KEY: <redacted>" in (out / "recipe.yaml").read_text()
    assert "PLAIN: visible" in (out / "recipe.yaml").read_text()


def test_show_and_provenance_redact(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", PASSED)
    resolved = load_recipe(RECIPE, OVERRIDES)
    for provenance in (False, True):
        text = format_show(resolved, provenance=provenance)
        assert LITERAL not in text and "HF_TOKEN: <redacted>" in text and "PLAIN: visible" in text


def test_report_result_and_junit_get_no_literal_secret(tmp_path):
    recipe = {"name": "r", "env": {"HF_TOKEN": LITERAL, "WANDB_API_KEY": {"from_env": True}}}
    judgement = Judgement(verdicts=[Verdict(name="completed", kind="completion", ok=True, message="2/2 steps")],
                          metrics={}, recipe=recipe, status={"state": "completed", "wall_s": 1.0})
    write_outputs(tmp_path, judgement, name="r", plan={"world_size": 1})
    for name in ("report.md", "result.json", "junit.xml"):
        assert LITERAL not in (tmp_path / name).read_text()


def test_engine_log_and_status_are_scrubbed(tmp_path):
    (tmp_path / "engine.log").write_text(f"token {LITERAL}\nkey {PASSED}\n")
    (tmp_path / "status.json").write_text(json.dumps({"error": f"boom {PASSED}"}))
    scrub_logs(tmp_path, [PASSED, LITERAL])
    assert (tmp_path / "engine.log").read_text() == f"token {REDACTED}\nkey {REDACTED}\n"
    assert PASSED not in (tmp_path / "status.json").read_text()


def test_redact_argv_for_the_nightly_summary_and_history():
    argv = ["python", "-m", "harness.cli", "run", "r.yaml", f"++env.HF_TOKEN={LITERAL}", "env.PLAIN=1",
            "++env.WANDB_API_KEY={from_env: true}", "--out", "x"]
    assert redact_argv(argv) == [*argv[:5], "++env.HF_TOKEN=<redacted>", "env.PLAIN=1", *argv[7:]]


def test_entry_run_json_redacts_its_command():
    from harness.nightly.runner import EntryRun

    run = EntryRun(entry="e", command=["harness", "run", "r.yaml", f"env.DB_PASSWORD={LITERAL}"])
    assert LITERAL not in json.dumps(run.to_json()) and run.command[-1].endswith(LITERAL)


def test_validate_and_plan_need_no_secret(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # `harness plan` writes plan.json here
    assert main(["plan", str(RECIPE), *OVERRIDES]) == 0
    assert LITERAL not in capsys.readouterr().out
    assert all(LITERAL not in p.read_text() for p in tmp_path.iterdir() if p.is_file())


def test_status_json_is_scrubbed_of_a_json_escaped_secret(tmp_path):
    secret = 'pa"ss\\word'
    (tmp_path / "status.json").write_text(json.dumps({"error": f"boom {secret}"}))
    scrub_logs(tmp_path, [secret])
    assert json.loads((tmp_path / "status.json").read_text()) == {"error": f"boom {REDACTED}"}
