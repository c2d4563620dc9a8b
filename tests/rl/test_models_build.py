"""build_model: registry, seeded reproducibility, config validation, save/load; token_logprobs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rl.config import ModelConfig
from rl.models import build_model, tiny_config, token_logprobs
from rl.models.build import load_families
from rl.models.registry import registry

torch.set_num_threads(1)
FAMILIES = ["qwen3_5", "qwen3_5_moe"]
VOCAB = 52


def cfg(family: str, **config) -> ModelConfig:
    return ModelConfig(family=family, config=config)


def state_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("family", FAMILIES)
def test_bitwise_reproducible_from_seed(family: str) -> None:
    torch.manual_seed(123)
    before = torch.rand(1)
    a = build_model(cfg(family), vocab_size=VOCAB, seed=7)
    b = build_model(cfg(family), vocab_size=VOCAB, seed=7)
    c = build_model(cfg(family), vocab_size=VOCAB, seed=8)
    assert state_equal(a, b)
    assert not state_equal(a, c)
    # building does not consume the caller's global RNG stream
    torch.manual_seed(123)
    assert torch.equal(torch.rand(1), before)


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_shape_and_overrides(family: str) -> None:
    model = build_model(cfg(family, hidden_size=32, num_hidden_layers=8), vocab_size=VOCAB, seed=0)
    c = model.config
    assert c.vocab_size == VOCAB and c.hidden_size == 32 and c.num_hidden_layers == 8
    assert c.layer_types.count("full_attention") == 2 and c.layer_types[3] == "full_attention"
    assert all(p.dtype == torch.float32 for p in model.parameters())
    if family == "qwen3_5_moe":
        assert c.num_experts == 4 and c.num_experts_per_tok == 2 and c.shared_expert_intermediate_size > 0


def test_registry_and_errors() -> None:
    load_families()
    assert set(FAMILIES) <= set(registry)
    with pytest.raises(ValueError, match="already registered"):
        registry["qwen3_5"] = registry["qwen3_5"]
    with pytest.raises(ValueError, match="family: 'gpt2'"):
        build_model(cfg("gpt2"), vocab_size=VOCAB, seed=0)
    with pytest.raises(ValueError, match="model.config.hiden_size.*hidden_size"):
        build_model(cfg("qwen3_5", hiden_size=32), vocab_size=VOCAB, seed=0)
    with pytest.raises(ValueError, match="model.config.vocab_size"):
        build_model(cfg("qwen3_5", vocab_size=10), vocab_size=VOCAB, seed=0)
    with pytest.raises(ValueError, match="model.config.layer_types"):
        build_model(cfg("qwen3_5", layer_types=["full_attention"]), vocab_size=VOCAB, seed=0)
    with pytest.raises(ValueError, match="modality: 'audio'"):
        build_model(replace(cfg("qwen3_5"), modality="audio"), vocab_size=VOCAB, seed=0)
    with pytest.raises(ValueError, match="model.path"):
        build_model(replace(cfg("qwen3_5"), path="/nonexistent/ckpt"), vocab_size=VOCAB, seed=0)
    assert tiny_config("qwen3_5")["num_hidden_layers"] == 4


@pytest.mark.parametrize("family", FAMILIES)
def test_from_path_round_trip(family: str, tmp_path: Path) -> None:
    model = build_model(cfg(family), vocab_size=VOCAB, seed=3)
    model.save_pretrained(tmp_path / "ckpt")
    loaded = build_model(replace(cfg(family), path=str(tmp_path / "ckpt")), vocab_size=VOCAB, seed=99)
    assert state_equal(model, loaded)


@pytest.mark.parametrize("family", FAMILIES)
def test_token_logprobs_match_manual(family: str) -> None:
    model = build_model(cfg(family), vocab_size=VOCAB, seed=1)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, VOCAB, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    ids[1, 6:] = 0
    lp = token_logprobs(model, ids, mask)
    assert lp.shape == (3, 9) and lp.dtype == torch.float32
    assert torch.all(lp[:, 0] == 0) and torch.all(lp[1, 6:] == 0)
    with torch.no_grad():
        for b, n in [(0, 9), (1, 6), (2, 9)]:
            # each row alone, unpadded, token by token from softmax probabilities
            logits = model(input_ids=ids[b : b + 1, :n]).logits[0].double()
            probs = torch.softmax(logits, dim=-1)
            manual = torch.log(probs[torch.arange(n - 1), ids[b, 1:n]])
            torch.testing.assert_close(lp[b, 1:n].double(), manual, atol=1e-5, rtol=0)
    assert torch.all(lp[:, 1:][mask[:, 1:] == 1] < 0)


def test_token_logprobs_shape_errors() -> None:
    model = build_model(cfg("qwen3_5"), vocab_size=VOCAB, seed=1)
    with pytest.raises(ValueError, match="attention_mask"):
        token_logprobs(model, torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.long))
