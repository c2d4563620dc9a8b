"""The throughput task and `generation.ignore_eos`: fixed-length prompts, rows run to
max_new_tokens, and the key refused for every task whose score reads where a completion ends."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml

from rl.config import ModelConfig, TaskConfig
from rl.envs import EOS_FREE_TASKS, make_env
from rl.generation import generate
from rl.models import build_model
from rl.preflight import static_refusals
from rl.run import NO_TOKEN_ID
from rl.tokenizer import load_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def test_prompts_have_the_set_length_and_are_a_function_of_seed_and_step() -> None:
    env = make_env(TaskConfig(name="fixed_length", params={"prompt_tokens": 128}))
    batch = env.sample(32, seed=42, step=3)
    assert {len(p.prompt) for p in batch} == {128}
    assert batch == env.sample(32, seed=42, step=3) != env.sample(32, seed=42, step=4)
    tokenizer = load_tokenizer("arith")
    assert {len(tokenizer(p.prompt)["input_ids"]) for p in batch} == {128}  # one token a character


def test_the_reward_is_the_share_of_digits() -> None:
    env = make_env(TaskConfig(name="fixed_length", params={}))
    problem = env.sample(1, seed=0, step=0)[0]
    assert [env.score(problem, text) for text in ("12ab", "", "abc", "9")] == [0.5, 0.0, 0.0, 1.0]


def test_bad_params_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="task.params.prompt_tokens: expected an integer >= 1"):
        make_env(TaskConfig(name="fixed_length", params={"prompt_tokens": 0}))
    with pytest.raises(ValueError, match="task.params.length: unknown fixed_length parameter"):
        make_env(TaskConfig(name="fixed_length", params={"length": 4}))


def test_no_row_ends_before_max_new_tokens_with_the_engines_ignore_eos_id() -> None:
    tokenizer = load_tokenizer("arith")
    model = build_model(ModelConfig(family="qwen3_5", config={"num_hidden_layers": 2,
                                                              "layer_types": ["full_attention"] * 2}),
                        vocab_size=len(tokenizer), seed=0)
    with torch.no_grad():  # eos the only token with a non-zero logit: rows end early (seeded, always the same)
        model.lm_head.weight.zero_()
        model.lm_head.weight[tokenizer.eos_token_id] = 1.0
    prompts = torch.randint(4, len(tokenizer), (4, 8), generator=torch.Generator().manual_seed(0))
    kwargs = dict(max_new_tokens=12, temperature=1.0, pad_token_id=tokenizer.pad_token_id)  # one seed a row
    ended = generate(model, prompts, eos_token_id=tokenizer.eos_token_id, seeds=[0, 1, 2, 3], **kwargs)
    full = generate(model, prompts, eos_token_id=NO_TOKEN_ID, seeds=[0, 1, 2, 3], **kwargs)
    assert min(ended.lengths.tolist()) < 20
    assert full.lengths.tolist() == [20] * 4 and bool(full.truncated.all())


def _arith_recipe(**changes) -> dict:
    data = copy.deepcopy(yaml.safe_load((ROOT / "recipes" / "arith_grpo_cpu.yaml").read_text()))
    data.pop("h200x2")
    data["generation"]["ignore_eos"] = True
    data.update(changes)
    return data


def test_ignore_eos_is_refused_for_a_task_that_reads_the_end_and_taken_for_fixed_length() -> None:
    assert EOS_FREE_TASKS == {"fixed_length"}
    refused = static_refusals(_arith_recipe())
    assert refused and refused[0].startswith("generation.ignore_eos: task 'arith' scores what a completion says")
    assert static_refusals(_arith_recipe(task={"name": "fixed_length", "params": {"prompt_tokens": 16}})) == []
