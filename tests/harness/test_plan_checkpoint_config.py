"""`harness plan` sizes a `model.path` recipe from the checkpoint's config.json, found without
network: a local directory, or a Hub id's snapshot in the local Hugging Face cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.plan import make_plan
from harness.plan.checkpoint_config import checkpoint_config_file
from harness.plan.resources import PlanError
from harness.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "qwen3_5_35b.yaml"


def _hub_snapshot(cache: Path, repo: str, config: dict) -> Path:
    org, name = repo.split("/")
    root = cache / f"models--{org}--{name}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text("abc123")
    snap = root / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    return snap / "config.json"


def test_a_cached_hub_checkpoint_sizes_the_plan_and_its_heads_are_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    data = load_recipe(RECIPE, ["model.config={}"]).data  # nothing from the recipe: all from config.json
    base = load_recipe(RECIPE).data["model"]["config"]
    file = _hub_snapshot(tmp_path, "Qwen/Qwen3.5-35B-A3B-Base", {"model_type": "qwen3_5_moe", "text_config": base})
    assert checkpoint_config_file("Qwen/Qwen3.5-35B-A3B-Base") == file
    plan = make_plan(data)
    assert plan.model["config_file"] == str(file) and plan.model["num_experts"] == 256
    assert plan.model["params"] == make_plan(load_recipe(RECIPE).data).model["params"]
    odd = {**base, "num_attention_heads": 15}
    file.write_text(json.dumps({"text_config": odd}))
    with pytest.raises(PlanError, match="does not divide model.config.num_attention_heads = 15"):
        make_plan(data)


def test_without_the_checkpoint_the_plan_uses_model_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert checkpoint_config_file("Qwen/Qwen3.5-35B-A3B-Base") is None
    assert checkpoint_config_file("tiny_qwen3_5_moe") is None  # shipped: the engine's preflight reads it
    plan = make_plan(load_recipe(RECIPE).data)
    assert "config_file" not in plan.model and plan.model["num_experts"] == 256


def test_without_the_shape_the_plan_says_where_the_checkpoint_config_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    hub = load_recipe(RECIPE, ["model.config={}"]).data  # model.path: the Hub id, not cached here
    with pytest.raises(PlanError, match=re.escape(
            "model.config.hidden_size is needed to plan a sharded or GPU run: add it to the recipe, or put "
            f"Qwen/Qwen3.5-35B-A3B-Base's config.json in the Hugging Face cache, under "
            f"{tmp_path}/models--Qwen--Qwen3.5-35B-A3B-Base (refs/main and the snapshot it names)")):
        make_plan(hub)
    local = load_recipe(RECIPE, ["model.config={}", f"model.path={tmp_path}"]).data  # a folder without config.json
    with pytest.raises(PlanError, match=re.escape(f"add it to the recipe, or a config.json to {tmp_path}")):
        make_plan(local)
    shipped = load_recipe(RECIPE, ["model.config={}", "model.path=tiny_qwen3_5_moe"]).data
    with pytest.raises(PlanError, match=r"GPU run: add it to the recipe$"):
        make_plan(shipped)


def test_a_local_directory_is_read_and_recipe_fields_win(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 1, "num_experts": 8}))
    data = load_recipe(RECIPE, [f"model.path={tmp_path}"]).data
    plan = make_plan(data)
    assert plan.model["config_file"] == str(tmp_path / "config.json")
    assert plan.model["num_experts"] == 256  # model.config overrides the checkpoint's field
