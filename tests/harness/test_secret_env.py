"""Secret recipe env entries (issue 18): the name pattern, pass-through, and every harness writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checks.judge import Judgement
from harness.checks.verdict import Verdict
from harness.cli import main
from harness.commands.check import write_outputs
from harness.commands.run import scrub_logs, write_inputs
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


def _write_inputs(out: Path, overrides: list[str]) -> None:
    """What a run writes before it launches: its recipe.yaml and plan.json (a dry run writes nothing)."""
    from harness.plan import make_plan  # noqa: PLC0415

    recipe = load_recipe(RECIPE, overrides).data
    out.mkdir()
    write_inputs(out, recipe, make_plan(redact_recipe(recipe)).to_json())


def test_dry_run_prints_and_a_run_writes_recipe_and_plan_redacted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_API_KEY", PASSED)
    out = tmp_path / "run"
    assert main(["run", str(RECIPE), *OVERRIDES, "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert PASSED not in text and LITERAL not in text
    _write_inputs(out, OVERRIDES)
    for path in out.rglob("*"):
        assert PASSED not in path.read_text() and LITERAL not in path.read_text(), path
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
    monkeypatch.chdir(tmp_path)  # anything `harness plan` wrote would land here
    assert main(["plan", str(RECIPE), *OVERRIDES]) == 0
    assert LITERAL not in capsys.readouterr().out
    assert all(LITERAL not in p.read_text() for p in tmp_path.iterdir() if p.is_file())


def test_status_json_is_scrubbed_of_a_json_escaped_secret(tmp_path):
    secret = 'pa"ss\\word'
    (tmp_path / "status.json").write_text(json.dumps({"error": f"boom {secret}"}))
    scrub_logs(tmp_path, [secret])
    assert json.loads((tmp_path / "status.json").read_text()) == {"error": f"boom {REDACTED}"}


# --- role env: policy.env and generation.env (issue 21) ------------------------------------

ROLE_OVERRIDES = ["++policy.env.WANDB_API_KEY={from_env: true}", f"++generation.env.HF_TOKEN={LITERAL}",
                  "++policy.env.ROLE_PLAIN=visible"]


def test_redact_recipe_redacts_every_role_env_and_keeps_the_original():
    recipe = {"name": "r", "env": {"PLAIN": "1"}, "generation": {"env": {"X": {"from_env": True}}},
              "policy": {"env": {"HF_TOKEN": LITERAL, "P": "p"}, "backend": "torch"}}
    out = redact_recipe(recipe)
    assert out["env"] == {"PLAIN": "1"}
    assert out["policy"] == {"env": {"HF_TOKEN": REDACTED, "P": "p"}, "backend": "torch"}
    assert out["generation"]["env"] == {"X": REDACTED}
    assert recipe["policy"]["env"]["HF_TOKEN"] == LITERAL and recipe["generation"]["env"]["X"] == {"from_env": True}


def test_the_engine_process_gets_the_top_level_env_and_the_role_secrets_only():
    recipe = {"env": {"A": "a"}, "policy": {"env": {"WANDB_API_KEY": {"from_env": True}, "P": "p"}},
              "generation": {"env": {"HF_TOKEN": LITERAL, "G": "g"}}}
    assert launch_env(recipe, {"WANDB_API_KEY": PASSED}) == {"A": "a", "WANDB_API_KEY": PASSED, "HF_TOKEN": LITERAL}
    assert secret_values(recipe, {"WANDB_API_KEY": PASSED}) == sorted([PASSED, LITERAL], key=len, reverse=True)
    with pytest.raises(RecipeError, match=r"policy\.env\.WANDB_API_KEY: pass-through"):
        launch_env(recipe, {})


@pytest.mark.parametrize(("overrides", "key"), [
    (["++env.HF_TOKEN=a", "++policy.env.HF_TOKEN=b"], "policy.env.HF_TOKEN"),
    (["++policy.env.HF_TOKEN=a", "++generation.env.HF_TOKEN=b"], "generation.env.HF_TOKEN"),
    (["++env.PLAIN=a", "++generation.env.PLAIN={from_env: true}"], "generation.env.PLAIN"),
])
def test_a_secret_name_with_two_values_is_refused_naming_the_key(overrides, key):
    with pytest.raises(RecipeError, match=rf"{key}: a secret reaches the engine .* takes one value"):
        load_recipe(RECIPE, overrides)


def test_one_value_per_secret_name_and_plain_role_values_of_their_own_load():
    data = load_recipe(RECIPE, ["++env.HF_TOKEN=a", "++policy.env.HF_TOKEN=a", "++env.PLAIN=top",
                                "++generation.env.PLAIN=gen"]).data
    assert data["policy"]["env"] == {"HF_TOKEN": "a"} and data["generation"]["env"] == {"PLAIN": "gen"}


def test_show_and_dry_run_redact_role_env(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_API_KEY", PASSED)
    text = format_show(load_recipe(RECIPE, ROLE_OVERRIDES), provenance=True)
    assert LITERAL not in text and "HF_TOKEN: <redacted>" in text and "ROLE_PLAIN: visible" in text
    out = tmp_path / "run"
    assert main(["run", str(RECIPE), *ROLE_OVERRIDES, "--dry-run", "--out", str(out)]) == 0
    assert PASSED not in capsys.readouterr().out
    _write_inputs(out, ROLE_OVERRIDES)
    for path in out.rglob("*"):
        assert PASSED not in path.read_text() and LITERAL not in path.read_text(), path
    assert "WANDB_API_KEY: <redacted>" in (out / "recipe.yaml").read_text()


def test_a_bad_role_env_value_is_one_line_naming_the_key(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"defaults: {RECIPE}\nname: r\npolicy: {{env: {{FOO: 1}}}}\n")
    assert main(["validate", str(recipe)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "policy.env.FOO: must be a string or a mapping, not 1" in err[0], err


def test_redact_argv_redacts_role_env_overrides():
    argv = [f"++policy.env.HF_TOKEN={LITERAL}", "generation.env.DB_PASSWORD=x", "++policy.env.PLAIN=1"]
    assert redact_argv(argv) == ["++policy.env.HF_TOKEN=<redacted>", "generation.env.DB_PASSWORD=<redacted>",
                                 "++policy.env.PLAIN=1"]


def test_a_role_env_alone_requires_env_propagated():
    from harness.checks.invariants import required_checks

    assert "env_propagated" in required_checks({"env": {}, "generation": {"env": {"G": "g"}}})
    assert "env_propagated" not in required_checks({"env": {}, "policy": {"env": {}}})
