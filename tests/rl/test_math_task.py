"""The `math` dataset task: rows from `data:` sources, seeded per-epoch shuffling that a resumed
cursor continues, chat-templated prompts, and the math-verify reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.config import DataConfig, TaskConfig, parse_config
from rl.envs import make_env
from rl.envs.math import verify_answer
from rl.prompt_data import load_rows
from rl.recipe.read import build
from rl.tokenizer import load_tokenizer

DATA = {"train": {"path": "tiny_math", "split": "train"}, "validation": {"path": "tiny_math", "split": "validation"},
        "prompt_key": "problem", "answer_key": "answer", "prompt_template": "{prompt}", "chat_template": True,
        "shuffle": True, "val_every_steps": 5, "val_max_samples": 0}


@pytest.fixture(scope="module")
def env():
    return make_env(TaskConfig(name="math", params={}), data=build(DataConfig, DATA, "data"),
                    tokenizer=load_tokenizer(None, model_path="tiny_qwen3_5_moe"))


@pytest.mark.parametrize("answer, completion, ok", [
    ("7", "\\boxed{7}", True),
    ("1/2", "so the answer is \\boxed{0.5}", True),
    ("\\frac{1}{2}", "\\boxed{1/2}", True),
    ("7", "\\boxed{8}", False),
    ("7", "no answer here", False),
])
def test_verifier_grades_mathematics_not_strings(answer: str, completion: str, ok: bool) -> None:
    assert verify_answer(answer, completion) is ok


def test_prompts_are_chat_templated_with_a_boxed_demonstration(env) -> None:
    problem = env.sample(1, seed=42, step=0)[0]
    assert problem.prompt.startswith("<|im_start|>user\n") and problem.prompt.endswith("<|im_start|>assistant\n")
    assert problem.target == "\\boxed{" + problem.answer + "}"
    assert env.score(problem, problem.target) == 1.0


def test_each_epoch_visits_every_row_once_in_a_seeded_order(env) -> None:
    n = len(env.train)  # 80 rows: 20 batches of 4 make an epoch
    epoch0 = [p.prompt for step in range(20) for p in env.sample(4, seed=42, step=step)]
    epoch1 = [p.prompt for step in range(20, 40) for p in env.sample(4, seed=42, step=step)]
    assert len(epoch0) == n and sorted(epoch0) == sorted(epoch1) == sorted(env.render(r[0]) for r in env.train)
    assert epoch0 != epoch1  # reshuffled per epoch
    assert [p.prompt for p in env.sample(4, seed=42, step=7)] == epoch0[28:32]  # a resumed cursor continues
    assert env.sample(4, seed=7, step=0) != env.sample(4, seed=42, step=0)
    assert env.sample(4, seed=42, step=-1) != env.sample(4, seed=42, step=0)  # warm start: its own stream


def test_validation_is_the_split_in_file_order(env) -> None:
    problems = env.validation_problems()
    assert [p.answer for p in problems] == [r[1] for r in env.validation] and len(problems) == 20


def test_local_jsonl_rows_and_a_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"question": f"{i}+1", "expected_answer": str(i + 1)}) + "\n" for i in range(3)))
    assert load_rows(str(path), None, prompt_key="question", answer_key="expected_answer")[2] == ("2+1", "3")
    with pytest.raises(ValueError, match="^data.prompt_key: row 0 .* no column 'problem'"):
        load_rows(str(path), None, prompt_key="problem", answer_key="expected_answer")
    with pytest.raises(ValueError, match="^data.train.split: 'train', but a local file has no splits"):
        load_rows(str(path), "train", prompt_key="question", answer_key="expected_answer")
    with pytest.raises(ValueError, match="^data.train: no shipped dataset 'tiny_math' with split 'test'"):
        load_rows("tiny_math", "test", prompt_key="problem", answer_key="answer")


def _cfg(**sections):
    return {"name": "t", "task": {"name": "math"}, "model": {"path": "tiny_qwen3_5_moe", "tokenizer": None},
            "data": {"train": {"path": "tiny_math", "split": "train"}}, **sections}


@pytest.mark.parametrize("sections, message", [
    ({"data": {}}, "^data.train: task 'math' reads its problems from a dataset"),
    ({"task": {"name": "arith"}}, "^data.train: task 'arith' generates its problems"),
    ({"data": {"train": {"path": "tiny_math"}, "validation": {"path": "tiny_math", "split": "validation"}}},
     "^data.validation: set data.val_every_steps"),
    ({"data": {"train": {"path": "tiny_math"}, "val_every_steps": 5}}, "^data.val_every_steps: a validation pass"),
    ({"data": {"train": {"path": "tiny_math"}, "prompt_template": "no slot"}}, "^data.prompt_template: must contain"),
    ({"model": {"tokenizer": None}}, "^model.tokenizer: null takes the tokenizer of model.path"),
])
def test_config_refuses_data_it_would_ignore(sections: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_config(_cfg(**sections))
