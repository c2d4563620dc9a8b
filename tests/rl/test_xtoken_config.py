"""What the engine refuses in a distillation recipe, one line naming the key, before launch."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from rl.config import parse_config
from rl.preflight import static_refusals

RECIPE = yaml.safe_load((Path(__file__).resolve().parents[2] / "recipes" / "xtoken_distill_cpu.yaml").read_text())


def _with(dotted: str, value: object) -> dict:
    data = copy.deepcopy(RECIPE)
    *parents, key = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[key] = value
    return data


def test_the_shipped_recipe_parses_and_nothing_is_refused():
    cfg = parse_config(copy.deepcopy(RECIPE))
    assert cfg.algorithm.name == "distill" and cfg.teacher.family == "llama"
    assert static_refusals(copy.deepcopy(RECIPE)) == []


@pytest.mark.parametrize("dotted, value, start", [
    ("policy.backend", "megatron", "policy.backend: megatron has no distillation step"),
    ("teacher.family", "gpt2", "teacher.family: 'gpt2' is not one of"),
    ("teacher.config.vocab_size", 10, "teacher.config.vocab_size: 10 is smaller than the tokenizer's 52"),
    ("teacher.config.hiden_size", 8, "teacher.config.hiden_size: not a LlamaConfig field"),
    ("algorithm.generations_per_prompt", 4, "algorithm.generations_per_prompt: distillation reads each datum once"),
    ("algorithm.baseline", "mean", "algorithm.baseline: algorithm.name: distill does not read it"),
    ("generation.temperature", 0.5, "generation.temperature: algorithm.name: distill does not read it"),
    ("algorithm.distill.responses", "teacher", "algorithm.distill.responses: 'teacher' is not one of"),
    ("algorithm.distill.temperature", 0.0, "algorithm.distill.temperature: must be > 0"),
])
def test_a_distillation_key_the_engine_cannot_honour_is_refused(dotted, value, start):
    refusals = static_refusals(_with(dotted, value))
    assert refusals and refusals[0].startswith(start), refusals


def test_teacher_and_distill_keys_are_refused_under_grpo():
    data = _with("algorithm.name", "grpo")
    data["algorithm"]["generations_per_prompt"] = 4
    assert static_refusals(data)[0].startswith("teacher: only algorithm.name: distill reads it")
    del data["teacher"]
    assert static_refusals(data)[0].startswith("algorithm.distill: only algorithm.name: distill reads it")
    del data["algorithm"]["distill"]
    assert static_refusals(data) == []


def test_distill_without_a_teacher_is_refused():
    data = copy.deepcopy(RECIPE)
    del data["teacher"]
    assert static_refusals(data)[0].startswith("teacher: algorithm.name: distill needs a teacher")
