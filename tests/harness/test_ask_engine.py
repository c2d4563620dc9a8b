"""The harness asks the engine's preflight before launch: validate (static), run and plan (this machine).

Most tests fake the engine's answer (`harness.engines.preflight_command` replaced by a tiny
script), so they take milliseconds; two ask the real engine (tests/harness/test_cli.py's validate and dry run of
every shipped recipe too) (`python -m rl.preflight`), whose
start-up costs seconds of imports.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import harness.engines
from harness.cli import main
from harness.preflight import PreflightError, ask_engine, engine_recipes
from harness.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"


@pytest.fixture
def fake_engine(monkeypatch, tmp_path):
    """Replace the engine's preflight by a script that answers `answer` for every file it is given."""

    def install(answer: dict, *, exit_code: int = 2, stderr: str = "") -> None:
        script = tmp_path / "fake_preflight.py"
        script.write_text(
            "import json, os, sys\n"
            "files = [a for a in sys.argv[1:] if not a.startswith('--')]\n"
            f"answer = {answer!r}\n"
            "seen = os.environ.get('SEEN')\n"
            "answer = {**answer, 'machine': answer['machine'] + ([seen] if seen else [])}\n"
            "print(json.dumps({f: answer for f in files}))\n"
            f"sys.stderr.write({stderr!r}); sys.exit({exit_code})\n")
        monkeypatch.setattr(harness.engines, "preflight_command",
                            lambda files, *, machine: [sys.executable, str(script), *files])

    return install


def test_a_run_refused_on_this_machine_is_exit_2_before_any_run_dir(fake_engine, tmp_path, capsys):
    fake_engine({"static": [], "machine": ["cluster: recipe needs 16 GPUs (h200), this machine has 0; "
                                           "run its tiny twin with --scale tiny"]})
    out = tmp_path / "never"
    assert main(["run", str(RECIPES / "qwen3_5_35b.yaml"), "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("error: cluster: recipe needs 16 GPUs (h200), this machine has 0; "
                                       "run its tiny twin with --scale tiny\n")
    assert not out.exists()


def test_a_dry_run_and_the_plan_show_this_machines_refusals_and_exit_0(fake_engine, tmp_path, capsys):
    fake_engine({"static": [], "machine": ["data_plane.backend: tq needs transfer_queue here"]})
    assert main(["run", str(RECIPES / "qwen3_5_35b.yaml"), "--dry-run", "--out", str(tmp_path / "dry")]) == 0
    assert "engine     refuses it on this machine: data_plane.backend: tq needs transfer_queue" in \
        capsys.readouterr().out
    assert main(["plan", str(RECIPES / "qwen3_5_35b.yaml"), "--out", str(tmp_path / "plan.json")]) == 0
    assert "refuses it on this machine: data_plane.backend" in capsys.readouterr().out


def test_a_static_refusal_stops_even_a_dry_run_and_the_plan(fake_engine, tmp_path, capsys):
    fake_engine({"static": ["model.config.x: not a Qwen3_5MoeTextConfig field"], "machine": []})
    assert main(["run", str(RECIPES / "qwen3_5_35b.yaml"), "--dry-run", "--out", str(tmp_path / "dry")]) == 2
    assert capsys.readouterr().err == "error: model.config.x: not a Qwen3_5MoeTextConfig field\n"
    assert main(["plan", str(RECIPES / "qwen3_5_35b.yaml"), "--out", str(tmp_path / "plan.json")]) == 2


def test_validate_reports_the_engines_static_refusals_per_scale(fake_engine, capsys):
    fake_engine({"static": ["generation.tp: 2, but ..."], "machine": []})
    assert main(["validate", str(RECIPES / "arith_grpo_cpu.yaml")]) == 2
    err = capsys.readouterr().err
    assert "FAIL" in err and "full scale: generation.tp: 2, but ..." in err and "h200x2 twin: generation.tp" in err


def test_the_recipe_env_reaches_the_preflight(fake_engine):
    fake_engine({"static": [], "machine": []})
    recipe = load_recipe(RECIPES / "arith_grpo_cpu.yaml", ["++env.SEEN='seen'"]).data
    assert ask_engine({"r": recipe}, machine=True)["r"].machine == ["seen"]


def test_a_preflight_that_crashes_is_an_internal_error_not_a_pass(fake_engine):
    fake_engine({"static": [], "machine": []}, exit_code=1, stderr="ModuleNotFoundError: No module named 'rl'\n")
    recipe = load_recipe(RECIPES / "arith_grpo_cpu.yaml").data
    with pytest.raises(PreflightError, match="exit 1.*No module named 'rl'"):
        ask_engine({"r": recipe}, machine=False)


def test_parity_variants_are_asked_and_external_engines_are_not():
    parity = load_recipe(RECIPES / "arith_grpo_cpu_parity.yaml").data
    variants = engine_recipes(parity)
    assert sorted(variants) == ["variant legacy", "variant tq"]
    assert variants["variant tq"]["data_plane"]["backend"] == "tq"
    assert not variants["variant tq"]["checks"].get("parity")
    external = load_recipe(RECIPES / "arith_grpo_cpu.yaml",
                           ["engine={command: ['{python}', 'x.py'], metrics: jsonl}"]).data
    assert engine_recipes(external) == {}


# --- the real engine ------------------------------------------------------------------------


def test_the_35b_recipe_here_is_refused_by_the_engine_with_the_tiny_twin_suggested(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this machine: no GPU, whatever it has
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    out = tmp_path / "never"
    assert main(["run", str(RECIPES / "qwen3_5_35b.yaml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("error: cluster: recipe needs 16 GPUs (h200), this machine has 0; "
                      "run its tiny twin with --scale tiny")
    assert all(line.startswith("error: ") for line in err)
    assert not out.exists()


def test_validate_rejects_a_recipe_whose_model_config_the_engine_rejects(tmp_path, capsys):
    shutil.copytree(RECIPES / "_base", tmp_path / "_base")
    (tmp_path / "qwen3_5_35b.yaml").write_text(
        (RECIPES / "qwen3_5_35b.yaml").read_text().replace("../thresholds", str(REPO / "thresholds")))
    base = tmp_path / "_base" / "qwen3_5_35b.yaml"
    base.write_text(base.read_text().replace("    vocab_size: 248320\n",
                                             "    vocab_size: 248320\n    full_attention_interval: 4\n"))
    assert main(["validate", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert ("FAIL " + str(tmp_path / "qwen3_5_35b.yaml") + ": full scale: model.config.full_attention_interval: "
            "not a Qwen3_5MoeTextConfig field") in captured.err
    assert "0 of 1 recipes valid" in captured.out



def test_static_questions_take_one_engine_start_whatever_their_env(fake_engine, monkeypatch):
    """A suite of fault entries, each with its own RL_FAULTS, used to cost one engine start each
    (the faults suite's validation: 250 s on 2 cores); `StaticAnswers` asks a recipe once."""
    from harness.preflight import StaticAnswers

    fake_engine({"static": [], "machine": []})
    starts = []
    command = harness.engines.preflight_command
    monkeypatch.setattr(harness.engines, "preflight_command",
                        lambda files, *, machine: starts.append(len(files)) or command(files, machine=machine))
    recipes = {f: load_recipe(RECIPES / "arith_grpo_cpu.yaml", [f"++env.RL_FAULTS={f}"]).data
               for f in ("nan_loss", "dispatch_inverse_reorder", "worker_sigkill")}
    ask_engine(recipes, machine=False)
    assert starts == [3]
    ask_engine(recipes, machine=True)  # this machine's answers can depend on the env: one start per env
    assert starts == [3, 1, 1, 1]
    ask = StaticAnswers()
    assert ask(recipes).keys() == recipes.keys() and ask({"again": recipes["nan_loss"]})["again"].static == []
    assert starts == [3, 1, 1, 1, 3]  # the second question was answered without the engine
