"""Fused q/k/v and gate/up projections decode as the unfused model does, and a refit reaches them.

Every model class (text, MoE, vision) samples the same tokens with the products fused (log-probs
to float rounding), in the static loop and with the grouped decode attention the worker adds on
CUDA; a refit written through the unchanged state_dict (in place, as the worker's is) moves the
fused weights, which a stale copy of them would not; the stacked halves in the wrong order fail.
"""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import EOS, PAD, text_model, vision_model

from rl.generation import row_seeds
from rl.generation.decode_attention import use_grouped_decode_attention
from rl.generation.fused_projections import fuse_projections
from rl.generation.static_decode import StaticDecoder

torch.set_num_threads(1)


def _models():
    vision, tok = vision_model()
    return {"qwen3_5": (text_model("qwen3_5"), PAD, EOS), "qwen3_5_moe": (text_model("qwen3_5_moe"), PAD, EOS),
            "vision": (vision, tok.pad_token_id, tok.eos_token_id)}


def _sample(model, pad: int, eos: int):
    ids = torch.randint(4, 40, (4, 9), generator=torch.Generator().manual_seed(1))
    return StaticDecoder(model, use_graphs=False).generate(
        ids, max_new_tokens=10, temperature=1.0, eos_token_id=eos, pad_token_id=pad, seeds=row_seeds(7, 4),
        prompt_lengths=torch.tensor([9, 3, 6, 1]))


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("name", ["qwen3_5", "qwen3_5_moe", "vision"])
def test_every_model_class_samples_the_same_tokens_fused(name: str, grouped: bool) -> None:
    model, pad, eos = _models()[name]
    if grouped:
        use_grouped_decode_attention(model)
    want = _sample(model, pad, eos)
    fused = copy.deepcopy(model)
    names = dict(fused.state_dict())
    assert fuse_projections(fused) > 0
    assert {k: v.shape for k, v in fused.state_dict().items()} == {k: v.shape for k, v in names.items()}
    got = _sample(fused, pad, eos)
    assert torch.equal(got.input_ids, want.input_ids) and torch.equal(got.attention_mask, want.attention_mask)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


def test_fusing_twice_changes_nothing() -> None:
    model = text_model("qwen3_5")
    first = fuse_projections(model)
    assert first > 0 and fuse_projections(model) == 0


@torch.no_grad()
def test_a_refit_in_place_reaches_the_fused_weights() -> None:
    """The worker's refit copies into state_dict's tensors: those are views of the stacked weights."""
    old, new = text_model("qwen3_5"), text_model("qwen3_5")
    for p in new.parameters():
        p.mul_(1.5)
    fused = copy.deepcopy(old)
    fuse_projections(fused)
    for name, target in fused.state_dict().items():
        target.copy_(new.state_dict()[name])
    ids = torch.randint(4, 40, (2, 7), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(fused(ids).logits, new(ids).logits, rtol=0, atol=1e-5)
    assert (fused(ids).logits - old(ids).logits).abs().max() > 1e-2
    fused.load_state_dict(old.state_dict())  # load_state_dict copies in place too
    torch.testing.assert_close(fused(ids).logits, old(ids).logits, rtol=0, atol=1e-5)


@torch.no_grad()
def test_the_comparison_sees_the_stacking_order() -> None:
    """The fused forwards do run: gate and up swapped in the stacked weight change the logits."""
    model = text_model("qwen3_5")
    ids = torch.randint(4, 40, (2, 7), generator=torch.Generator().manual_seed(3))
    want = model(ids).logits
    fuse_projections(model)
    mlp = model.model.layers[0].mlp
    half = mlp.fused_gate_up_sizes[0]
    swapped = torch.cat([mlp.fused_gate_up[half:], mlp.fused_gate_up[:half]])
    mlp.fused_gate_up.copy_(swapped)
    assert (model(ids).logits - want).abs().max() > 1e-3


@torch.no_grad()
@pytest.mark.parametrize("keyword", ["cache", "past_key_values"])
def test_either_cache_keyword_updates_the_cache(keyword: str) -> None:
    """transformers 5.17 hands the attention `past_key_values`, 5.24 `cache`: the fused forward
    takes both and fills the cache as the unfused one does (a dropped cache attends to nothing past)."""
    import inspect

    from transformers import DynamicCache

    model = text_model("qwen3_5")
    layer = next(i for i, t in enumerate(model.config.layer_types) if t == "full_attention")
    takes = inspect.signature(type(model.model.layers[layer].self_attn).forward).parameters
    if keyword == "cache" and "cache" not in takes:
        pytest.skip(f"the installed transformers' attention takes no {keyword!r}")
    fused = copy.deepcopy(model)
    fuse_projections(fused)
    want, got = DynamicCache(config=model.config), DynamicCache(config=fused.config)
    attention, fused_attention = model.model.layers[layer].self_attn, fused.model.layers[layer].self_attn
    hidden = torch.randn(2, 7, model.config.hidden_size, generator=torch.Generator().manual_seed(4))
    positions = model.model.rotary_emb(hidden, torch.arange(7).expand(3, 2, -1))  # (t, h, w) positions
    a, _ = attention(hidden, positions, None, **{keyword: want})
    b, _ = fused_attention(hidden, positions, None, **{keyword: got})
    torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
    assert got.get_seq_length(layer) == want.get_seq_length(layer) == 7
