"""warm_start: trains, caches by everything that determines the result, loads on a hit."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from rl.config import ModelConfig, TaskConfig, WarmStartConfig
from rl.envs import make_env
from rl.generation import decode_responses, generate, row_seeds
from rl.models import build_model, token_logprobs
from rl.models.image_inputs import ImageLayout, encode_prompts
from rl.recipe.read import build
from rl.tokenizer import load_tokenizer
from rl.warm_start import default_cache_dir, supervised_inputs, warm_start

torch.set_num_threads(1)
CFG = WarmStartConfig(steps=2, lr=3e-3, batch_size=4)


def evaluate_accuracy(model, tokenizer, env, *, num_problems: int, seed: int, step: int, temperature: float,
                      max_new_tokens: int = 8) -> float:
    """Mean reward of one sample per problem (temperature 0 = greedy): the test's oracle."""
    problems = env.sample(num_problems, seed=seed, step=step)
    prompts = encode_prompts(tokenizer, problems, ImageLayout.of(model))
    gen = generate(model, prompts.input_ids, prompt_lengths=prompts.lengths, max_new_tokens=max_new_tokens,
                   temperature=temperature, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                   seeds=row_seeds(seed, len(problems)), **prompts.columns())
    texts = decode_responses(tokenizer, gen)
    return sum(env.score(p, t) for p, t in zip(problems, texts)) / len(problems)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("arith")


def fresh(tok, family: str = "qwen3_5", seed: int = 0):
    return build_model(ModelConfig(family=family), vocab_size=len(tok), seed=seed)


def arith(**params):
    return make_env(TaskConfig(name="arith", params={"max_operand": 20, **params}))


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return all(torch.equal(sa[k], sb[k]) for k in sa)


def test_supervised_inputs_mask_answer_and_eos(tok) -> None:
    env = arith()
    problems = [env.render(7, "+", 12), env.render(1, "+", 2)]  # answers "19" and "3"
    ids, attn, loss_mask, images = supervised_inputs(tok, problems)
    assert tok.decode(ids[0]) == "07+12=19<eos>"
    assert tok.decode(ids[1]) == "01+02=3<eos><pad>"
    assert attn.tolist() == [[1] * 9, [1] * 8 + [0]]
    assert loss_mask.tolist() == [[0] * 6 + [1] * 3, [0] * 6 + [1] * 2 + [0]]
    assert images == {}  # text problems carry no image columns


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_miss_trains_then_hit_loads_identical_weights(tok, family: str, tmp_path: Path) -> None:
    env = arith()
    a = fresh(tok, family)
    first = warm_start(a, tok, env, CFG, seed=1, cache_dir=tmp_path)
    assert first["cached"] is False and first["loss"] > 0 and Path(first["path"]).is_file()
    assert not same_weights(a, fresh(tok, family))
    b = fresh(tok, family)
    second = warm_start(b, tok, env, CFG, seed=1, cache_dir=tmp_path)
    assert second["cached"] is True and second["loss"] == first["loss"] and second["path"] == first["path"]
    assert same_weights(a, b)
    # Training itself is deterministic: a run without the cache gives the same weights.
    c = fresh(tok, family)
    warm_start(c, tok, env, CFG, seed=1, cache_dir=tmp_path / "other")
    assert same_weights(a, c)


@pytest.mark.parametrize(
    "change",
    [{"seed": 2}, {"cfg": replace(CFG, lr=1e-3)}, {"env": {"max_operand": 30}}, {"init_seed": 5}],
)
def test_key_changes_miss(tok, change: dict, tmp_path: Path) -> None:
    warm_start(fresh(tok), tok, arith(), CFG, seed=1, cache_dir=tmp_path)
    result = warm_start(
        fresh(tok, seed=change.get("init_seed", 0)), tok, arith(**change.get("env", {})),
        change.get("cfg", CFG), seed=change.get("seed", 1), cache_dir=tmp_path,
    )
    assert result["cached"] is False
    assert len(list(tmp_path.glob("*.pt"))) == 2


def test_training_lowers_the_loss(tok, tmp_path: Path) -> None:
    env, model = arith(), fresh(tok)
    ids, attn, loss_mask, _ = supervised_inputs(tok, env.sample(64, seed=9, step=0))

    def loss() -> float:
        with torch.no_grad():
            return float(-(token_logprobs(model, ids, attn) * loss_mask).sum() / loss_mask.sum())

    before = loss()
    warm_start(model, tok, env, WarmStartConfig(steps=6, lr=3e-3, batch_size=8), seed=0, cache_dir=tmp_path)
    assert loss() < before - 1.0  # measured: 3.96 -> 2.52
    assert 0.0 <= evaluate_accuracy(model, tok, env, num_problems=16, seed=0, step=0, temperature=0.0) <= 1.0


def test_zero_steps_and_config_errors(tok, tmp_path: Path, monkeypatch) -> None:
    model = fresh(tok)
    assert warm_start(model, tok, arith(), replace(CFG, steps=0), seed=0, cache_dir=tmp_path)["cached"] is False
    assert same_weights(model, fresh(tok)) and not list(tmp_path.iterdir())
    for bad, field in [({"lr": 0}, "lr"), ({"epochs": 1}, "epochs"), ({"batch_size": 0}, "batch_size"),
                       ({"steps": -1}, "steps"), ({"stop_at_loss": 0.0}, "stop_at_loss"), ({"steps": "3"}, "steps")]:
        with pytest.raises(ValueError, match=f"algorithm.warm_start.{field}"):  # the section refuses it
            build(WarmStartConfig, {**asdict(CFG), **bad}, "algorithm.warm_start")
    monkeypatch.setenv("RL_CACHE_DIR", str(tmp_path / "root"))
    assert default_cache_dir() == tmp_path / "root" / "warm_start"
    monkeypatch.delenv("RL_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "rl" / "warm_start"


def test_stop_at_loss_ends_at_the_first_full_window_at_or_below_it(tok, tmp_path: Path) -> None:
    window = WarmStartConfig.LOSS_WINDOW
    cfg = WarmStartConfig(steps=window + 10, lr=3e-3, batch_size=4)
    reached = warm_start(fresh(tok), tok, arith(), replace(cfg, stop_at_loss=1e6), seed=0, cache_dir=tmp_path)
    assert reached["steps"] == window  # every loss is below 1e6: stops once the window is full
    never = warm_start(fresh(tok), tok, arith(), replace(cfg, stop_at_loss=1e-9), seed=0, cache_dir=tmp_path)
    assert never["steps"] == window + 10
    assert warm_start(fresh(tok), tok, arith(), replace(cfg, stop_at_loss=1e6), seed=0,
                      cache_dir=tmp_path)["steps"] == window  # a cache hit reports the steps it trained
    plain = warm_start(fresh(tok), tok, arith(), cfg, seed=0, cache_dir=tmp_path)
    assert plain["cached"] is False and plain["steps"] == window + 10  # the target is part of the key
    assert len(list(tmp_path.glob("*.pt"))) == 3
