"""The `arith` task: registry, determinism in (seed, step), fixed prompt length, scoring."""

from __future__ import annotations

import pytest

from rl.config import TaskConfig
from rl.envs import ENVS, Problem, make_env, register_env
from rl.envs.arith import QUESTIONS, ArithEnv
from rl.tokenizer import load_tokenizer


def env(**params) -> ArithEnv:
    return make_env(TaskConfig(name="arith", params=params))


def prompt_chars(e: ArithEnv) -> int:
    """Length of the longest prompt (of every prompt, with zero_pad and one question): two operands,
    an operator, in the longest of the questions drawn from."""
    return 2 * e.params.width + 1 + max(len(q) - 2 for q in QUESTIONS[: e.params.questions])


def test_deterministic_in_seed_and_step() -> None:
    e = env(max_operand=99, ops=["+", "-", "*"])
    a = e.sample(32, seed=1, step=3)
    assert a == e.sample(32, seed=1, step=3)
    assert a != e.sample(32, seed=1, step=4)
    assert a != e.sample(32, seed=2, step=3)
    assert env(max_operand=99, ops=["+", "-", "*"]).sample(32, seed=1, step=3) == a
    assert e.sample(8, seed=1, step=3) == a[:8]


@pytest.mark.parametrize("params", [{"max_operand": 9}, {"max_operand": 20}, {"max_operand": 7, "digits": 3}])
def test_fixed_prompt_token_length(params: dict) -> None:
    e, tok = env(**params, ops=["+", "-", "*"]), load_tokenizer("arith")
    lengths = {len(tok(p.prompt, add_special_tokens=False)["input_ids"]) for p in e.sample(200, seed=0, step=1)}
    assert lengths == {prompt_chars(e)}


def test_without_zero_pad_prompts_differ_in_length() -> None:
    e = env(max_operand=20, zero_pad=False)
    prompts = [p.prompt for p in e.sample(200, seed=0, step=1)]
    assert {len(p) for p in prompts} == {4, 5, 6} and max(map(len, prompts)) == prompt_chars(e)
    assert env(max_operand=20, zero_pad=False).render(7, "+", 12) == Problem(prompt="7+12=", answer="19")
    with pytest.raises(ValueError, match="task.params.zero_pad"):
        env(zero_pad="no")


def test_questions_ask_the_same_sums_in_prompts_of_mixed_lengths() -> None:
    bare, asked = env(max_operand=9), env(max_operand=9, questions=2)
    tok = load_tokenizer("arith")
    problems = asked.sample(200, seed=0, step=1)
    assert {len(tok(p.prompt, add_special_tokens=False)["input_ids"]) for p in problems} == {4, 12}
    assert max(len(p.prompt) for p in problems) == prompt_chars(asked) == 12
    assert asked.render(3, "+", 4, 1) == Problem(prompt="what is 3+4?", answer="7")
    assert {p.prompt for p in problems} - {p.prompt for p in bare.sample(200, seed=0, step=1)}  # not all bare
    assert bare.sample(50, seed=3, step=2) == env(max_operand=9, questions=1).sample(50, seed=3, step=2)
    assert asked.spec["params"]["questions"] == 2 and "questions" not in bare.spec["params"]
    for value in (0, 5, True, "2"):
        with pytest.raises(ValueError, match="task.params.questions"):
            env(questions=value)


def test_answers_are_correct_and_nonnegative() -> None:
    e = env(max_operand=20, ops=["+", "-", "*"])
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    seen = set()
    for p in e.sample(300, seed=5, step=0):
        a, op, b = p.prompt[:2], p.prompt[2], p.prompt[3:5]
        assert p.prompt[5:] == "=" and len(p.prompt) == 6
        assert p.answer == str(ops[op](int(a), int(b))) and p.answer.isdigit()
        seen.add(op)
        assert 0 <= int(a) <= 20 and 0 <= int(b) <= 20
    assert seen == {"+", "-", "*"}
    assert env(max_operand=5).render(3, "-", 5) == Problem(prompt="5-3=", answer="2")


@pytest.mark.parametrize(
    "completion, reward",
    [("19", 1.0), (" 19 ", 1.0), ("19<eos>", 1.0), ("19<eos>7<pad>", 1.0), ("019", 0.0),
     ("1", 0.0), ("", 0.0), ("<eos>19", 0.0), ("19 7", 0.0), ("191", 0.0)],
)
def test_score_edge_cases(completion: str, reward: float) -> None:
    assert env().score(Problem(prompt="07+12=", answer="19"), completion) == reward


def test_spec_fills_defaults() -> None:
    assert env(max_operand=20).spec == {
        "name": "arith",
        "params": {"max_operand": 20, "min_operand": 0, "ops": ["+"], "digits": 2, "zero_pad": True},
    }


@pytest.mark.parametrize(
    "params, field",
    [({"max_operand": -1}, "max_operand"), ({"ops": ["/"]}, "ops"), ({"ops": "+"}, "ops"), ({"ops": []}, "ops"),
     ({"ops": ["+", "+"]}, "ops"), ({"max_operand": 100, "digits": 2}, "digits"), ({"max_opernd": 3}, "max_opernd"),
     ({"min_operand": 5, "max_operand": 3}, "min_operand")],
)
def test_param_errors_name_the_field(params: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"task.params.{field}"):
        env(**params)


def test_registry_errors() -> None:
    with pytest.raises(ValueError, match="task.name"):
        make_env(TaskConfig(name="chess", params={}))
    with pytest.raises(ValueError, match="already registered"):
        register_env("arith")(ENVS["arith"])
