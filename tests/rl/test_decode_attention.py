"""Grouped decode attention gives what sdpa with repeated key/value heads gives, and the same tokens.

The attention function is compared with HF's sdpa (the reference the models ran with) on one
query token, with and without a padding mask; a grouping that pairs query heads with the wrong
key/value head fails the same comparison. Then every model class, in both CPU loops, samples the
same tokens bit for bit (log-probs to float rounding) from a mixed-length batch with it as with sdpa.
"""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import EOS, PAD, VOCAB, text_model, vision_model
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from rl.config import ModelConfig
from rl.generation import generate, row_seeds
from rl.generation.decode_attention import (
    FLASH_DECODE,
    GROUPED_DECODE,
    flash_decode_attention,
    grouped_decode_attention,
    use_grouped_decode_attention,
)
from rl.generation.static_decode import StaticDecoder
from rl.models import build_model

torch.set_num_threads(1)


class _Heads(torch.nn.Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def _qkv(batch: int, kv_heads: int, groups: int, q_length: int, k_length: int = 11, dim: int = 8):
    g = torch.Generator().manual_seed(kv_heads * 10 + groups)
    q = torch.randn(batch, kv_heads * groups, q_length, dim, generator=g)
    k = torch.randn(batch, kv_heads, k_length, dim, generator=g)
    v = torch.randn(batch, kv_heads, k_length, dim, generator=g)
    mask = torch.ones(batch, 1, q_length, k_length, dtype=torch.bool)
    mask[0, ..., :4] = False  # row 0's prompt padding
    return q, k, v, mask


@pytest.mark.parametrize("groups", [2, 4])
@pytest.mark.parametrize("masked", [True, False])
def test_one_query_token_attends_as_sdpa_with_repeated_heads(groups: int, masked: bool) -> None:
    q, k, v, mask = _qkv(3, 2, groups, 1)
    mask = mask if masked else None
    want, _ = sdpa_attention_forward(_Heads(groups), q, k, v, mask, scaling=0.3)
    got, weights = grouped_decode_attention(_Heads(groups), q, k, v, mask, scaling=0.3)
    assert weights is None and got.shape == want.shape == (3, 1, 2 * groups, 8)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_a_wrong_grouping_fails_the_comparison() -> None:
    """Query head i belongs to key/value head i // G; pairing it with i % Hkv is caught."""
    q, k, v, mask = _qkv(3, 2, 4, 1)
    want, _ = sdpa_attention_forward(_Heads(4), q, k, v, mask)
    interleaved = q.reshape(3, 4, 2, 8).transpose(1, 2).reshape(3, 8, 1, 8)  # head i now at slot of i % 2
    wrong, _ = grouped_decode_attention(_Heads(4), interleaved, k, v, mask)
    wrong = wrong.reshape(3, 1, 2, 4, 8).transpose(2, 3).reshape(3, 1, 8, 8)  # back in head order
    assert (wrong - want).abs().max() > 1e-2


def test_longer_queries_are_sdpa_as_given() -> None:
    q, k, v, mask = _qkv(2, 2, 2, 5)
    want, _ = sdpa_attention_forward(_Heads(2), q, k, v, mask)
    got, _ = grouped_decode_attention(_Heads(2), q, k, v, mask)
    assert torch.equal(got, want)


def _text(family: str):
    return text_model(family), {}, PAD, EOS


def _vision():
    m, tok = vision_model()
    return m, {}, tok.pad_token_id, tok.eos_token_id


MODELS = {"qwen3_5": lambda: _text("qwen3_5"), "qwen3_5_moe": lambda: _text("qwen3_5_moe"), "vision": _vision}


def _sample(model, loop: str, pad: int, eos: int):
    lengths = torch.tensor([9, 3, 6, 1])
    ids = torch.randint(4, 40, (4, 9), generator=torch.Generator().manual_seed(1))
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=eos, pad_token_id=pad, seeds=row_seeds(7, 4),
                prompt_lengths=lengths)
    loop, counter = loop.removesuffix("_counter"), True if loop.endswith("_counter") else None
    if loop == "eager":
        return generate(model, ids, counter_rng=counter, **args)
    return StaticDecoder(model, use_graphs=False, counter_rng=counter).generate(ids, **args)


@pytest.mark.parametrize("loop", ["eager", "static", "static_counter"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_class_samples_the_same_tokens(name: str, loop: str) -> None:
    model, _, pad, eos = MODELS[name]()
    want = _sample(model, loop, pad, eos)
    grouped = copy.deepcopy(model)
    assert use_grouped_decode_attention(grouped)  # the split-K kernel: test_flash_decode.py
    assert grouped.config.get_text_config()._attn_implementation == GROUPED_DECODE
    if name == "vision":
        assert grouped.config.vision_config._attn_implementation == "sdpa"  # the tower keeps its own
    got = _sample(grouped, loop, pad, eos)
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.attention_mask, want.attention_mask)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


def test_the_default_is_grouped_sdpa_and_the_split_k_kernel_falls_back_to_it_without_triton() -> None:
    """The engine's default stays sdpa's kernel until an H200 has run the split-K one; without
    Triton (CI) or off a GPU the flash name is grouped sdpa; the kernel: test_flash_decode.py."""
    model = build_model(ModelConfig(family="qwen3_5"), vocab_size=VOCAB, seed=0)
    assert use_grouped_decode_attention(model)
    assert model.config.get_text_config()._attn_implementation == GROUPED_DECODE
    model = build_model(ModelConfig(family="qwen3_5"), vocab_size=VOCAB, seed=0)
    assert use_grouped_decode_attention(model, flash=True)
    assert model.config.get_text_config()._attn_implementation == FLASH_DECODE
    q, k, v, mask = _qkv(3, 2, 4, 1, dim=16)
    want, _ = grouped_decode_attention(_Heads(4), q, k, v, mask, scaling=0.3)
    got, _ = flash_decode_attention(_Heads(4), q, k, v, mask, scaling=0.3)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_a_model_on_another_implementation_keeps_it() -> None:
    model = build_model(ModelConfig(family="qwen3_5"), vocab_size=VOCAB, seed=0)
    model.config._attn_implementation = "eager"
    assert not use_grouped_decode_attention(model)
    assert model.config._attn_implementation == "eager"


def test_the_sampling_comparison_sees_the_decode_attention(monkeypatch) -> None:
    """The models' decode steps do run the registered function: grouped wrongly, the tokens change."""
    from transformers import AttentionInterface

    def interleaved(module, query, key, value, attention_mask, **kwargs):
        b, h, n, d = query.shape
        if n != 1:
            return grouped_decode_attention(module, query, key, value, attention_mask, **kwargs)
        g = module.num_key_value_groups
        q = query.reshape(b, g, h // g, d).transpose(1, 2).reshape(b, h, 1, d)
        return grouped_decode_attention(module, q, key, value, attention_mask, **kwargs)

    model, _, pad, eos = MODELS["qwen3_5"]()
    want = _sample(model, "static", pad, eos)
    monkeypatch.setitem(AttentionInterface._global_mapping, GROUPED_DECODE, interleaved)
    use_grouped_decode_attention(model)
    got = _sample(model, "static", pad, eos)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() > 1e-3
