"""Role env on the engine side: `policy.env` and `generation.env` over the top-level `env`.

The merge (RunConfig.worker_env), its validation, pass-through resolution and redaction, what a
worker starts with, and a worker dropping the other role's variables. The real engine proving
each role sees its own and not the other's: tests/integration/test_role_env_run.py.
"""

from __future__ import annotations

import os

import pytest
import yaml

from rl import faults
from rl.cluster.ray_cluster import worker_env
from rl.config import load_config, parse_config, read_recipe
from rl.recipe import secret_env
from rl.run import _hidden_env, _without_faults
from rl.workers.base import WorkerBase

SECRET = "sk-role-71c2"
BASE = {"name": "t", "cluster": {"devices_per_node": 2},
        "algorithm": {"prompts_per_step": 4, "generations_per_prompt": 4}}


def _data(env=None, policy=None, generation=None, **extra):
    data = {**BASE, **extra}
    for key, value in (("env", env), ("policy", policy), ("generation", generation)):
        if value is not None:
            data[key] = value if key == "env" else {"env": value}
    return data


def _recipe(tmp_path, data):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_worker_gets_the_top_level_env_overlaid_by_its_role_and_not_the_other_role():
    cfg = parse_config(_data(env={"A": "top", "SHARED": "top"}, policy={"SHARED": "policy", "P": "p", "A": "top"},
                             generation={"G": "g"}))
    assert cfg.worker_env("policy") == {"A": "top", "SHARED": "policy", "P": "p", "G": None}
    assert cfg.worker_env("generation") == {"A": "top", "SHARED": "top", "G": "g", "P": None}


def test_a_name_the_top_level_env_sets_is_never_unset_for_the_other_role():
    cfg = parse_config(_data(env={"X": "top"}, policy={"X": "policy"}))
    assert cfg.worker_env("generation") == {"X": "top"}


@pytest.mark.parametrize("scope", ["policy", "generation"])
def test_a_role_env_value_that_is_not_a_string_names_its_key(scope):
    with pytest.raises(ValueError, match=rf"^{scope}\.env\.FOO: environment values must be strings, got 1$"):
        parse_config(_data(**{scope: {"FOO": 1}}))


def test_distillation_refuses_a_generation_env():
    data = _data(generation={"G": "g"}, teacher={"family": "llama"})
    data["algorithm"] = {**data["algorithm"], "name": "distill", "generations_per_prompt": 1}
    with pytest.raises(ValueError, match=r"^generation\.env: algorithm.name: distill does not read it"):
        parse_config(data)


def test_role_pass_through_entries_read_the_engine_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    data = _data(policy={"HF_TOKEN": "<redacted>"}, generation={"HF_TOKEN": {"from_env": True}})
    cfg = load_config(_recipe(tmp_path, data))
    assert cfg.policy.env == {"HF_TOKEN": SECRET} == cfg.generation.env
    assert data["policy"]["env"] == {"HF_TOKEN": "<redacted>"}  # the caller's mapping is left alone
    assert _hidden_env(read_recipe(tmp_path / "recipe.yaml")) == ["HF_TOKEN"]


def test_a_missing_role_pass_through_names_its_key(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ValueError, match=r"^generation\.env\.HF_TOKEN: pass-through"):
        load_config(_recipe(tmp_path, _data(generation={"HF_TOKEN": "<redacted>"})))


def test_scopes_lists_each_env_mapping_a_recipe_sets():
    data = _data(env={"A": "a"}, generation={"G": "g"}, policy={})
    assert secret_env.scopes(data) == [("env", {"A": "a"}), ("generation.env", {"G": "g"})]


def test_the_runtime_env_leaves_out_what_the_role_must_not_have(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")  # a switch the driver passes on, unless a role's env owns it
    env = worker_env({"A": "a", "NCCL_DEBUG": None}, gpu=False)
    assert env["A"] == "a" and "NCCL_DEBUG" not in env
    assert worker_env({"A": "a"}, gpu=False)["NCCL_DEBUG"] == "WARN"


def test_a_worker_drops_the_other_roles_variables_and_reports_them_unset(monkeypatch):
    monkeypatch.setenv("ROLE_ONLY_X", "leaked")
    monkeypatch.setenv("KEPT_Y", "y")
    worker = WorkerBase(name="w", rank=0, env_keys=["KEPT_Y", "ROLE_ONLY_X"], unset_env=["ROLE_ONLY_X"])
    assert "ROLE_ONLY_X" not in os.environ
    assert worker.info(salt="s")["env_digest"] == {"KEPT_Y": secret_env.digest("s", "y"), "ROLE_ONLY_X": None}


def test_a_resumed_run_drops_planted_faults_from_every_env(monkeypatch):
    monkeypatch.delenv(faults.ENV, raising=False)
    cfg = parse_config(_data(env={faults.ENV: "nan_loss", "A": "a"}, policy={faults.ENV: "worker_hang@2"},
                             generation={faults.ENV: "nan_loss", "G": "g"}, env_unsafe_allow=[faults.ENV]))
    clean = _without_faults(cfg)
    assert (clean.env, clean.policy.env, clean.generation.env) == ({"A": "a"}, {}, {"G": "g"})


def test_a_worker_runs_at_its_raylets_priority_unless_the_recipe_says_otherwise():
    assert worker_env({}, gpu=False)["RAY_worker_niceness"] == "0"  # Ray's own default is nice 15
    assert worker_env({"RAY_worker_niceness": "5"}, gpu=False)["RAY_worker_niceness"] == "5"
    assert "RAY_worker_niceness" not in worker_env({"RAY_worker_niceness": None}, gpu=False)


@pytest.mark.parametrize("outside", [None, "7"])
def test_a_private_rays_workers_start_at_its_raylets_priority_and_the_environment_is_restored(monkeypatch, outside):
    from rl.cluster import ray_cluster

    seen = []
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_cluster.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_cluster.ray, "init", lambda **kw: seen.append(os.environ.get("RAY_worker_niceness")))
    if outside is None:
        monkeypatch.delenv("RAY_worker_niceness", raising=False)
    else:
        monkeypatch.setenv("RAY_worker_niceness", outside)  # e.g. a recipe's env, allowed to set it
    os.rmdir(ray_cluster.start_ray(num_cpus=1))
    assert seen == [outside or "0"]  # what the raylet, and so every worker, starts with
    assert os.environ.get("RAY_worker_niceness") == outside
