"""The tiny models the decoding tests sample from, one per model class (qwen3_5, qwen3_5_moe, the
VL class), each with a louder end-of-sequence logit so a batch's rows end at different steps."""

from __future__ import annotations

import torch

from rl.config import ModelConfig
from rl.models import build_model
from rl.tokenizer import load_tokenizer

VOCAB, PAD, EOS = 52, 0, 1  # the text models' vocabulary and special ids


def text_model(family: str) -> torch.nn.Module:
    m = build_model(ModelConfig(family=family), vocab_size=VOCAB, seed=0)
    with torch.no_grad():
        m.lm_head.weight[EOS] *= 25
    return m


def vision_model() -> tuple[torch.nn.Module, object]:
    """The VL class (one gated-delta-net and one attention layer) and its tokenizer, arith_vl."""
    tok = load_tokenizer("arith_vl")
    cfg = ModelConfig(family="qwen3_5", modality="vision", tokenizer="arith_vl",
                      config={"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2})
    m = build_model(cfg, vocab_size=len(tok), seed=0)
    with torch.no_grad():
        m.lm_head.weight[tok.eos_token_id] *= 12
    return m, tok


def static_sample(model: torch.nn.Module, **decoder: object):
    """`model` through the static loop (no graph) with the counter draw, on four prompts of lengths
    9, 3, 6 and 1 for 10 tokens: the case the decode kernels' tests hold a kernel's decoder to."""
    from rl.generation import row_seeds
    from rl.generation.static_decode import StaticDecoder

    ids = torch.randint(4, 40, (4, 9), generator=torch.Generator().manual_seed(1))
    return StaticDecoder(model, use_graphs=False, counter_rng=True, **decoder).generate(
        ids, max_new_tokens=10, temperature=1.0, eos_token_id=EOS, pad_token_id=PAD, seeds=row_seeds(7, 4),
        prompt_lengths=torch.tensor([9, 3, 6, 1]))
