"""The training backends' rules (rl/backends/rules.py): each backend is listed, each of its
refusals fires on a minimal recipe through the engine's preflight, an unknown name is refused with
the known ones, asking imports no backend, and nothing outside the registry picks a backend by name."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rl.backends import get_backend
from rl.backends.megatron.rules import CPU_REFUSAL, DISTRIBUTED_OPTIMIZER_CPU_REFUSAL
from rl.backends.rules import BackendRules, backend_names, backend_rules
from rl.config import parse_config
from rl.preflight import machine_refusals, static_refusals

ROOT = Path(__file__).resolve().parents[2]
CPU_RECIPE = yaml.safe_load((ROOT / "recipes" / "arith_grpo_cpu.yaml").read_text())
DISTILL_RECIPE = yaml.safe_load((ROOT / "recipes" / "xtoken_distill_cpu.yaml").read_text())
TIED = {**CPU_RECIPE["model"]["config"], "tie_word_embeddings": True}


def recipe(base: dict = CPU_RECIPE, **dotted) -> dict:
    data = copy.deepcopy(base)
    for key, value in dotted.items():
        *parents, leaf = key.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return data


def test_the_registry_lists_every_backend():
    assert backend_names() == ["megatron", "torch"]
    assert [backend_rules(name).name for name in backend_names()] == backend_names()


# (backend, recipe changes, the one refusal's start: key and reason)
REFUSALS = [
    ("torch", {"policy__parallel": {"tp": 2}}, "policy.parallel: the torch backend is data parallel only"),
    ("torch", {"policy__precision": "bf16"}, "policy.precision: the torch backend trains in fp32 only"),
    ("torch", {"policy__distributed_optimizer": True}, "policy.distributed_optimizer: the torch backend has no"),
    ("torch", {"policy__compile": True}, "policy.compile: the torch backend runs eager; use policy.backend: megatron"),
    ("megatron", {"policy__compile": True}, CPU_REFUSAL),
    ("megatron", {"policy__distributed_optimizer": True}, DISTRIBUTED_OPTIMIZER_CPU_REFUSAL),
    ("megatron", {"policy__sequence_packing": {"enabled": True}, "policy__parallel": {"cp": 2, "pp": 2},
                  "cluster__nodes": 2}, "policy.sequence_packing.enabled with policy.parallel.cp = 2 and pp = 2"),
    ("megatron", {"policy__parallel": {"pp": 2}, "model__config": TIED},
     "policy.parallel.pp = 2 with model.config.tie_word_embeddings: the megatron backend pipelines untied "
     "embeddings only"),
    ("megatron", {"policy__parallel": {"tp": 2}, "model__config": {**CPU_RECIPE["model"]["config"],
                                                                   "num_key_value_heads": 1}},
     "policy.parallel.tp = 2 does not divide model.config.num_key_value_heads = 1"),
    ("megatron", {"policy__parallel": {"tp": 2}, "model__config": {**CPU_RECIPE["model"]["config"],
                                                                   "linear_num_key_heads": 1}},
     "policy.parallel.tp x cp = 2 does not divide model.config.linear_num_key_heads = 1"),
]


@pytest.mark.parametrize("backend, changes, expect", REFUSALS, ids=[f"{b}-{e.split(':')[0]}" for b, _, e in REFUSALS])
def test_each_refusal_of_each_backend_fires_on_a_minimal_recipe(backend, changes, expect):
    assert static_refusals(recipe(policy__backend=backend)) == []
    (line,) = static_refusals(recipe(policy__backend=backend, **changes))
    assert line.startswith(expect)


def test_the_megatron_packing_of_a_vlm_and_its_distillation_are_refused():
    vision = static_refusals(recipe(policy__backend="megatron", policy__sequence_packing={"enabled": True},
                                    model__modality="vision"))  # a text recipe's VLM: other lines too
    assert any(line.startswith("policy.sequence_packing.enabled with model.modality: vision: the megatron backend")
               for line in vision), vision
    assert static_refusals(recipe(DISTILL_RECIPE, policy__backend="megatron")) == [
        "policy.backend: megatron has no distillation step yet; use policy.backend: torch"]


def test_the_shape_rules_read_a_checkpoints_own_config_on_the_machine():
    """With `model.path` the shape is the checkpoint's: unknown statically, read where it is."""
    data = recipe(policy__backend="megatron", policy__parallel={"tp": 4, "sp": True}, cluster__devices_per_node=4,
                  model={"family": "qwen3_5_moe", "path": "tiny_qwen3_5_moe", "config": {}, "tokenizer": "arith"})
    assert static_refusals(data) == []
    assert "policy.parallel.tp = 4 does not divide model.config.num_key_value_heads = 2 (megatron-core needs " \
           "num_query_groups % tp == 0)" in machine_refusals(data)


def test_a_capability_a_backend_lacks_is_a_refusal_naming_the_backends_that_have_it():
    class Bare(BackendRules):  # never registered: the base rules of a backend that can do little
        name, cpu, vision, packs = "bare", False, False, False

    cfg = parse_config(recipe(model__modality="vision", policy__sequence_packing={"enabled": True}))
    assert Bare().refusals(cfg) == [
        "cluster.device: the bare backend needs a GPU; use policy.backend: megatron or torch",
        "model.modality: the bare backend trains text models only; use policy.backend: megatron or torch",
        "policy.sequence_packing.enabled: the bare backend does not pack rows; set it false"]


def test_an_unknown_backend_is_refused_with_the_known_names():
    """The recipe's reader refuses it (its choices are the registry's names), and so does the registry."""
    refused = ["policy.backend: 'jax' is not one of ['megatron', 'torch']"]
    assert static_refusals(recipe(policy__backend="jax")) == refused
    with pytest.raises(ValueError) as info:
        get_backend("jax")
    assert str(info.value) == "policy.backend: unknown backend 'jax'; known: ['megatron', 'torch']"


def test_asking_the_rules_imports_no_backend():
    code = ("import sys; from rl.backends.rules import backend_names, backend_rules; "
            "[backend_rules(n) for n in backend_names()]; "
            "print(sorted(m for m in ('torch', 'megatron.core', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_no_backend_is_chosen_by_name_outside_the_registry():
    """A capability is an attribute of the backend's rules; comparing its name elsewhere restates a rule
    (`backend == "torch"`, `policy["backend"] != "megatron"`, `backend in ("torch", ...)`)."""
    name = "|".join(backend_names())
    compared = rf"""backend\W*\s*(==|!=)\s*["']({name})["']"""
    listed = rf"""backend\W*\s+(not\s+)?in\s*[(\[{{][^)\]}}]*["']({name})["']"""
    by_name = re.compile(f"{compared}|{listed}")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for folder in ("rl", "harness") for path in sorted((ROOT / folder).rglob("*.py"))
             if path != ROOT / "rl" / "backends" / "rules.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if by_name.search(line)]
    assert found == []
