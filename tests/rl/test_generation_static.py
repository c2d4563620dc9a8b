"""The static-cache decoder samples exactly what the eager loop samples (CPU, no graph), and
`generation.decode` resolves or refuses as documented. The CUDA-graph replay of the same
iteration is measured against this on the GPU (bench/bench_generation.py)."""

from __future__ import annotations

import pytest
import torch
from decode_models import static_sample, vision_model

from rl.config import ModelConfig
from rl.generation import generate, row_seeds
from rl.generation.decode_mode import fp32_experts, resolve_decode
from rl.generation.static_decode import StaticDecoder, batch_bucket
from rl.models import build_model

torch.set_num_threads(1)
VOCAB, PAD, EOS = 52, 0, 1
ARGS = dict(max_new_tokens=12, temperature=1.0, eos_token_id=EOS, pad_token_id=PAD)
FIELDS = ("input_ids", "attention_mask", "response_mask", "lengths", "truncated")


def model(family: str) -> torch.nn.Module:
    m = build_model(ModelConfig(family=family), vocab_size=VOCAB, seed=0)
    with torch.no_grad():  # eos likelier at some steps than others, so that rows end at different steps
        m.lm_head.weight[EOS] *= 25
    return m


def prompts(b: int = 6, p: int = 5) -> torch.Tensor:
    return torch.randint(4, VOCAB, (b, p), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_static_decoder_equals_the_eager_loop(family: str) -> None:
    m, p = model(family), prompts()
    eager = generate(m, p, seeds=row_seeds(3, 6), **ARGS)
    decoder = StaticDecoder(m, use_graphs=False)
    static = decoder.generate(p, seeds=row_seeds(3, 6), **ARGS)
    assert eager.truncated.any() and (~eager.truncated).any(), "the seed should end some rows early"
    for name in FIELDS:
        assert torch.equal(getattr(eager, name), getattr(static, name)), name
    # Same tokens; the log-probs differ only by the static cache's masked attention sums.
    assert torch.allclose(eager.gen_logprobs, static.gen_logprobs, atol=1e-5, rtol=0)
    again = decoder.generate(p, seeds=row_seeds(3, 6), **ARGS)  # the slot is reused: reset in place, same bits
    other = decoder.generate(p, seeds=row_seeds(4, 6), **ARGS)
    assert torch.equal(static.input_ids, again.input_ids) and torch.equal(static.gen_logprobs, again.gen_logprobs)
    assert not torch.equal(static.input_ids, other.input_ids)
    assert len(decoder._slots) == 1


def test_static_decoder_greedy_and_a_second_shape() -> None:
    m = model("qwen3_5")
    decoder = StaticDecoder(m, use_graphs=False)
    for b, p in ((3, 4), (5, 7)):
        ids = prompts(b, p)
        eager = generate(m, ids, seeds=row_seeds(0, b), **{**ARGS, "temperature": 0.0})
        static = decoder.generate(ids, seeds=row_seeds(0, b), **{**ARGS, "temperature": 0.0})
        assert torch.equal(eager.input_ids, static.input_ids) and static.input_ids.shape == (b, p + 12)
    assert len(decoder._slots) == 2


def test_refusals() -> None:
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        StaticDecoder(model("qwen3_5"), use_graphs=True)


@pytest.mark.parametrize(("batch", "bucket"), [(1, 1), (2, 2), (3, 4), (5, 8), (8, 8), (9, 16), (64, 64), (65, 72)])
def test_batch_bucket(batch: int, bucket: int) -> None:
    assert batch_bucket(batch) == bucket


def test_resolve_decode() -> None:
    assert resolve_decode("auto", gpu=True) == "graphs"
    assert resolve_decode("auto", gpu=False) == "eager"
    assert resolve_decode("static", gpu=False) == "static"
    with pytest.raises(ValueError, match="^generation.decode: graphs needs a GPU"):
        resolve_decode("graphs", gpu=False)
    with pytest.raises(ValueError, match="is not one of"):
        resolve_decode("fast", gpu=True)
    assert resolve_decode("auto", gpu=True, fp32_experts=True) == "static"  # graphs would die at capture
    assert resolve_decode("auto", gpu=False, fp32_experts=True) == "eager"
    assert resolve_decode("static", gpu=True, fp32_experts=True) == "static"
    with pytest.raises(ValueError, match="^generation.decode: graphs cannot capture the model's fp32 experts"):
        resolve_decode("graphs", gpu=True, fp32_experts=True)


def test_fp32_experts() -> None:
    assert fp32_experts("qwen3_5_moe", "fp32")
    assert not fp32_experts("qwen3_5_moe", "bf16")
    assert not fp32_experts("qwen3_5", "fp32")


def test_the_decoder_keeps_at_most_its_slots_least_recently_used_out_first() -> None:
    """generation.decode_slots: each kept call shape holds a cache; the oldest goes first."""
    dec = StaticDecoder(model("qwen3_5"), use_graphs=False, max_slots=2)
    for b in (2, 3, 2, 4):
        dec.generate(prompts(b=b), seeds=row_seeds(0, b), **ARGS)
    assert [key[0] for key in dec._slots] == [2, 4]  # 3 was least recently used when 4 came
    with pytest.raises(ValueError, match="max_slots"):
        StaticDecoder(model("qwen3_5"), use_graphs=False, max_slots=0)


def test_phase_seconds_split_a_call_into_its_prompt_and_its_decode_steps() -> None:
    import time

    decoder = StaticDecoder(model("qwen3_5"), use_graphs=False)
    with pytest.raises(RuntimeError, match="no finished generate call"):
        decoder.phase_seconds()
    t0 = time.perf_counter()
    decoder.generate(prompts(), seeds=row_seeds(3, 6), **{**ARGS, "eos_token_id": -1})
    wall = time.perf_counter() - t0
    prompt, steps = decoder.phase_seconds()
    assert 0 < prompt and 0 < steps and prompt + steps <= wall


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe", "vision"])
def test_the_direct_head_samples_what_the_model_s_own_logits_sample(family: str) -> None:
    """The step's logits written by `torch.mm(..., out=)` from the base model's hidden state are the
    model's own: same tokens, log-probs to the product's rounding, greedy as well as sampled."""
    m = vision_model()[0] if family == "vision" else model(family)
    want, got = static_sample(m, direct_head=False), static_sample(m, direct_head=True)
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.attention_mask, want.attention_mask)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5
    greedy = dict(ARGS, temperature=0.0)
    direct = StaticDecoder(m, use_graphs=False, direct_head=True).generate(prompts(), seeds=row_seeds(3, 6), **greedy)
    own = StaticDecoder(m, use_graphs=False).generate(prompts(), seeds=row_seeds(3, 6), **greedy)
    assert torch.equal(direct.input_ids, own.input_ids)


def test_the_direct_head_is_refused_where_the_logits_are_more_than_a_product() -> None:
    m = model("qwen3_5")
    assert not StaticDecoder(m, use_graphs=False).direct_head  # without graphs: only when asked
    m.lm_head.bias = torch.nn.Parameter(torch.zeros(VOCAB))
    with pytest.raises(ValueError, match="direct_head"):
        StaticDecoder(m, use_graphs=False, direct_head=True)
