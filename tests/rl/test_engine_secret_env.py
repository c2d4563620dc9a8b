"""The engine side of secret env entries: resolved from its own environment, hashed for workers."""

from __future__ import annotations

import pytest
import yaml

from rl.config import load_config
from rl.recipe import secret_env
from rl.workers.base import WorkerBase

SECRET = "sk-engine-5e6f"


def _recipe(tmp_path, env):
    data = {"name": "t", "cluster": {"devices_per_node": 2},
            "algorithm": {"prompts_per_step": 4, "generations_per_prompt": 4}, "env": env}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_redacted_and_from_env_entries_read_the_engine_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("OTHER", "o")
    cfg = load_config(_recipe(tmp_path, {"HF_TOKEN": "<redacted>", "OTHER": {"from_env": True}, "PLAIN": "1"}))
    assert cfg.env == {"HF_TOKEN": SECRET, "OTHER": "o", "PLAIN": "1"}


def test_missing_pass_through_names_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ValueError, match="env.HF_TOKEN"):
        load_config(_recipe(tmp_path, {"HF_TOKEN": "<redacted>"}))


def test_hidden_names():
    assert secret_env.hidden_names({"A": "<redacted>", "B": {"from_env": True}, "C": "c"}) == ["A", "B"]


def test_worker_info_reports_a_salted_hash_never_the_value(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    worker = WorkerBase(name="w", rank=0, env_keys=["HF_TOKEN", "UNSET_VAR_X"])
    info = worker.info(salt="s1")
    assert SECRET not in repr(info)
    assert info["env_digest"] == {"HF_TOKEN": secret_env.digest("s1", SECRET), "UNSET_VAR_X": None}
    assert worker.info(salt="s2")["env_digest"]["HF_TOKEN"] != info["env_digest"]["HF_TOKEN"]
