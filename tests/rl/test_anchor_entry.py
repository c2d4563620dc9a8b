"""The training anchor (staged from outside the repository, bench/stage_gpu.sh) builds its model
through `rl.backends.megatron.hf_config_of`, passing the model section as a plain mapping: from
2026-12-04 (4253789) to 2026-12-08 that call raised, and every throughput run's anchor gave no
figure. This is the anchor's call as it is written there."""

from transformers import Qwen3_5TextConfig

from rl.backends.megatron import hf_config_of
from rl.config import ModelConfig

DENSE_1B = dict(hidden_size=2048, num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=4,
                head_dim=128, intermediate_size=5632, max_position_embeddings=4096, vocab_size=151936,
                layer_types=["full_attention"] * 12)


def test_the_anchors_mapping_gives_the_dense_1b_config():
    config = hf_config_of({"family": "qwen3_5", "config": DENSE_1B}, 151936)
    assert isinstance(config, Qwen3_5TextConfig)
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size) == (
        2048, 12, 5632, 151936)
    assert config.layer_types == ["full_attention"] * 12


def test_a_model_config_gives_the_same_config():
    by_mapping = hf_config_of({"family": "qwen3_5", "config": DENSE_1B}, 151936)
    by_section = hf_config_of(ModelConfig(family="qwen3_5", config=DENSE_1B), 151936)
    assert by_section.to_dict() == by_mapping.to_dict()
