"""M-RoPE outside the HF model (rl/models/mrope.py) equals HF Qwen3.5's, position and angle."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.config import ModelConfig
from rl.models import build_model
from rl.models.mrope import mrope_angles, mrope_position_ids, mrope_section_of
from rl.tokenizer import load_tokenizer

IMAGE, START, END = 54, 52, 53


@pytest.fixture(scope="module")
def hf_model():
    cfg = ModelConfig(family="qwen3_5_moe", modality="vision", tokenizer="arith_vl",
                      config={"layer_types": ["full_attention"], "num_hidden_layers": 1})
    return build_model(cfg, vocab_size=len(load_tokenizer("arith_vl")), seed=0)


def _rows(grids: list[tuple[int, int]], text_before: int, text_after: list[int], merge: int = 2):
    """One image per row (grid h x w patches), then `text_after[b]` text tokens and right padding."""
    rows, masks = [], []
    length = max(text_before + 2 + h * w // merge ** 2 + a for (h, w), a in zip(grids, text_after)) + 2
    for (h, w), after in zip(grids, text_after):
        ids = [7] * text_before + [START] + [IMAGE] * (h * w // merge ** 2) + [END] + [9] * after
        masks.append([1] * len(ids) + [0] * (length - len(ids)))
        rows.append(ids + [0] * (length - len(ids)))
    thw = torch.tensor([[1, h, w] for h, w in grids])
    return torch.tensor(rows), torch.tensor(masks), thw


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2, 4, 6]), st.sampled_from([2, 4, 8])), min_size=1, max_size=3),
       st.integers(0, 3), st.data())
def test_positions_equal_hf_get_rope_index(hf_model, grids, before, data) -> None:
    after = data.draw(st.lists(st.integers(0, 4), min_size=len(grids), max_size=len(grids)))
    ids, mask, thw = _rows(grids, before, after)
    want, _ = hf_model.model.get_rope_index(ids, mm_token_type_ids=(ids == IMAGE).int(), image_grid_thw=thw,
                                            attention_mask=mask)
    got = mrope_position_ids(ids, mask, thw, image_token_id=IMAGE, spatial_merge_size=2)
    assert torch.equal(got, want)


def test_text_after_an_image_resumes_at_start_plus_the_grid_side() -> None:
    ids, mask, thw = _rows([(4, 8)], text_before=1, text_after=[2])  # merged grid 2 x 4: 8 tokens
    pos = mrope_position_ids(ids, mask, thw, image_token_id=IMAGE, spatial_merge_size=2)
    assert pos[:, 0, :3].tolist() == [[0, 1, 2]] * 3               # text, vision_start, first image token
    assert pos[1, 0, 2:10].tolist() == [2, 2, 2, 2, 3, 3, 3, 3]    # height axis over the 2 x 4 grid
    assert pos[2, 0, 2:10].tolist() == [2, 3, 4, 5, 2, 3, 4, 5]    # width axis
    assert pos[:, 0, 10].tolist() == [6, 6, 6]                      # vision_end at 2 + max(2, 4)


def test_image_tokens_that_do_not_fill_the_grid_are_refused() -> None:
    ids, mask, _ = _rows([(4, 4)], 0, [1])
    with pytest.raises(ValueError, match="image tokens for a merged grid"):
        mrope_position_ids(ids, mask, torch.tensor([[1, 4, 8]]), image_token_id=IMAGE, spatial_merge_size=2)
    with pytest.raises(ValueError, match="more image token runs"):
        mrope_position_ids(ids, mask, None, image_token_id=IMAGE, spatial_merge_size=2)


@pytest.mark.parametrize("head_dim, partial", [(16, 0.25), (64, 1.0), (256, 0.25)])
def test_angles_equal_hf_rotary_embedding(head_dim: int, partial: float) -> None:
    """cos/sin of our angles are HF's Qwen3_5MoeTextRotaryEmbedding outputs, bit for bit."""
    from transformers import Qwen3_5MoeTextConfig
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeTextRotaryEmbedding

    config = Qwen3_5MoeTextConfig(head_dim=head_dim, hidden_size=64, num_attention_heads=4,
                                  rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                                   "partial_rotary_factor": partial})
    rope = Qwen3_5MoeTextRotaryEmbedding(config)
    positions = torch.randint(0, 500, (3, 2, 9))
    cos, sin = rope(torch.zeros(1, dtype=torch.float32), positions)
    angles = mrope_angles(positions, rope.inv_freq, mrope_section_of(config))
    assert torch.equal(angles.cos(), cos) and torch.equal(angles.sin(), sin)
