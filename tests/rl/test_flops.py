"""FLOPs per sample: the formula by hand, and Qwen3.5 dense/MoE configs read from transformers."""

import pytest
import torch
from transformers import Qwen3_5MoeConfig, Qwen3_5MoeTextConfig, Qwen3_5TextConfig

from rl.models.flops import FlopsConfig, flops_per_sample, total_flops

TINY = FlopsConfig(
    num_layers=2, hidden_size=4, q_dim=4, kv_dim=2, ffn_dim=8, vocab_size=10,
    num_full_attention_layers=1,
)


def test_formula_by_hand():
    # L = 3, n = 2, h = 4, q = 4, k = 2, f = 8, V = 10, one full-attention layer:
    # attention 6*3*(2*(2*4*4 + 2*2*4) + 1*3*4) = 18*(96 + 12) = 1944
    # mlp       18*2*3*4*8                      = 3456
    # vocab     6*3*4*10                        = 720
    assert flops_per_sample(TINY, 3) == 1944 + 3456 + 720
    assert flops_per_sample(TINY, 0) == 0


def test_quadratic_term_only_on_full_attention_layers():
    all_full = FlopsConfig(**{**TINY.__dict__, "num_full_attention_layers": 2})
    # One more full layer adds exactly 6 * L * L * q = 6*3*3*4.
    assert flops_per_sample(all_full, 3) - flops_per_sample(TINY, 3) == 6 * 3 * 3 * 4


def test_total_is_a_sum_over_unpadded_lengths_in_any_order():
    lens = [3, 7, 1, 12]
    expect = sum(flops_per_sample(TINY, L) for L in lens)
    assert total_flops(TINY, lens) == expect
    assert total_flops(TINY, list(reversed(lens))) == expect
    assert total_flops(TINY, torch.tensor(lens)) == expect
    # Two DP shards sum to the whole step.
    assert total_flops(TINY, lens[:2]) + total_flops(TINY, lens[2:]) == expect
    assert total_flops(TINY, []) == 0


def test_bad_lengths_raise():
    with pytest.raises(ValueError, match="non-negative integer"):
        flops_per_sample(TINY, -1)
    with pytest.raises(ValueError, match="non-negative integer"):
        total_flops(TINY, [2.5])


def test_reads_qwen3_5_moe_35b_a3b_shapes():
    # transformers 5.24 defaults of Qwen3_5MoeTextConfig are the 35B-A3B shapes.
    cfg = FlopsConfig.from_hf_config(Qwen3_5MoeTextConfig())
    assert cfg == FlopsConfig(
        num_layers=40, hidden_size=2048,
        q_dim=16 * 256, kv_dim=2 * 256,
        ffn_dim=512 * 8 + 512,  # 8 routed experts of 512 plus the shared expert of 512
        vocab_size=248320,
        num_full_attention_layers=10,  # every 4th layer
    )
    # The vision-language wrapper reads its text_config.
    assert FlopsConfig.from_hf_config(Qwen3_5MoeConfig()) == cfg
    # Sanity: about 6 x (~2.4e9 active multiply-adds) per token for short sequences.
    per_token = flops_per_sample(cfg, 1)
    assert 1.2e10 < per_token < 1.8e10


def test_reads_qwen3_5_dense_and_dicts():
    hf = Qwen3_5TextConfig(
        hidden_size=64, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=128, vocab_size=100,
    )
    cfg = FlopsConfig.from_hf_config(hf)
    assert (cfg.q_dim, cfg.kv_dim, cfg.ffn_dim, cfg.num_full_attention_layers) == (64, 32, 128, 2)
    as_dict = {
        "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100,
        "linear_num_key_heads": 2,
    }
    assert FlopsConfig.from_hf_config(as_dict) == cfg
    # Explicit layer_types win; a config without linear attention is all full attention.
    explicit = {**as_dict, "layer_types": ["full_attention"] * 3 + ["linear_attention"] * 5}
    assert FlopsConfig.from_hf_config(explicit).num_full_attention_layers == 3
    plain = {k: v for k, v in as_dict.items() if k != "linear_num_key_heads"}
    assert FlopsConfig.from_hf_config(plain).num_full_attention_layers == 8
    # flops_per_sample accepts the HF object directly.
    assert flops_per_sample(hf, 5) == flops_per_sample(cfg, 5)


def test_missing_or_inconsistent_fields_raise():
    with pytest.raises(ValueError, match="hidden_size"):
        FlopsConfig.from_hf_config({"num_hidden_layers": 2})
    with pytest.raises(ValueError, match="layer_types"):
        FlopsConfig.from_hf_config({
            "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 8, "vocab_size": 4, "layer_types": ["full_attention"],
        })
