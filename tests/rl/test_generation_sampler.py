"""generate: reproducible from a generator, stops at eos, and its log-probs match teacher forcing."""

from __future__ import annotations

import pytest
import torch

from rl.config import ModelConfig
from rl.generation import Generation, decode_responses, generate, row_seeds
from rl.models import build_model, token_logprobs
from rl.tokenizer import load_tokenizer

torch.set_num_threads(1)
VOCAB, PAD, EOS = 52, 0, 1


def tiny(family: str, eos_boost: float = 0.0) -> torch.nn.Module:
    model = build_model(ModelConfig(family=family), vocab_size=VOCAB, seed=0)
    with torch.no_grad():
        # Make eos likely (~1/4 per step) so that rows end at different steps.
        model.lm_head.weight[EOS] += eos_boost * model.model.norm.weight.sign()
    return model


def prompts(b: int = 6, p: int = 5) -> torch.Tensor:
    return torch.randint(4, VOCAB, (b, p), generator=torch.Generator().manual_seed(1))


def run(model, prompt_ids, seed: int, **kw) -> Generation:
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=EOS, pad_token_id=PAD)
    args.update(kw)
    return generate(model, prompt_ids, seeds=row_seeds(seed, len(prompt_ids)), **args)


def assert_same(a: Generation, b: Generation) -> None:
    for name in ("input_ids", "attention_mask", "response_mask", "gen_logprobs", "lengths", "truncated"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_reproducible_with_same_generator_seed(family: str) -> None:
    model, p = tiny(family), prompts()
    a, b, c = run(model, p, seed=0), run(model, p, seed=0), run(model, p, seed=1)
    assert_same(a, b)
    assert not torch.equal(a.input_ids, c.input_ids)
    assert a.input_ids.shape == (6, 15) and torch.equal(a.input_ids[:, :5], p)


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_stops_at_eos_then_pads(family: str) -> None:
    model, p = tiny(family, eos_boost=1.5), prompts(b=16)
    g = run(model, p, seed=0)
    assert g.truncated.any() and (~g.truncated).any(), "seed should give both kinds of rows"
    for b in range(16):
        resp = g.input_ids[b, 5:]
        eos_at = (resp == EOS).nonzero().flatten().tolist()
        n = int(g.lengths[b])
        if g.truncated[b]:
            assert eos_at == [] and n == 15
        else:
            assert n == 5 + eos_at[0] + 1
            assert torch.all(resp[eos_at[0] + 1 :] == PAD)
        assert g.attention_mask[b].tolist() == [1] * n + [0] * (15 - n)
        assert g.response_mask[b].tolist() == [0] * 5 + [1] * (n - 5) + [0] * (15 - n)
        assert torch.all(g.gen_logprobs[b][g.response_mask[b] == 0] == 0)
        assert torch.all(g.gen_logprobs[b][g.response_mask[b] == 1] < 0)


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_gen_logprobs_equal_teacher_forcing(family: str, temperature: float) -> None:
    model, p = tiny(family, eos_boost=1.0), prompts(b=8)
    g = run(model, p, seed=3, temperature=temperature, max_new_tokens=12)
    with torch.no_grad():
        lp = token_logprobs(model, g.input_ids, g.attention_mask)
    resp = g.response_mask.bool()
    torch.testing.assert_close(lp[resp], g.gen_logprobs[resp], atol=1e-5, rtol=0)


def test_greedy_needs_no_randomness_and_batch_rows_are_independent() -> None:
    model, p = tiny("qwen3_5", eos_boost=1.0), prompts(b=4)
    a, b = run(model, p, seed=0, temperature=0.0), run(model, p, seed=5, temperature=0.0)
    assert_same(a, b)
    single = run(model, p[2:3], seed=0, temperature=0.0)
    n = int(single.lengths[0])
    assert torch.equal(single.input_ids[0, :n], a.input_ids[2, :n])
    torch.testing.assert_close(single.gen_logprobs[0], a.gen_logprobs[2], atol=1e-5, rtol=0)


def test_decode_responses_and_arg_errors() -> None:
    tok = load_tokenizer("arith")
    model = tiny("qwen3_5", eos_boost=1.5)
    g = run(model, prompts(b=8), seed=0)
    texts = decode_responses(tok, g)
    for text, ids in zip(texts, g.response_ids()):
        assert text == tok.decode([i for i in ids if i not in (EOS, PAD)], skip_special_tokens=True)
        assert "<eos>" not in text and "<pad>" not in text
    with pytest.raises(ValueError, match="max_new_tokens"):
        run(model, prompts(), seed=0, max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        run(model, prompts(), seed=0, temperature=-1.0)
    with pytest.raises(ValueError, match="prompt_ids"):
        run(model, torch.zeros(3, dtype=torch.long), seed=0)
