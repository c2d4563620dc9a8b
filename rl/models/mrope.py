"""Qwen3.5's multimodal rotary positions (M-RoPE) outside the Hugging Face model.

A backend that trains the language model without the HF class (megatron-core) must give every
token the same rotary angles HF gives it, or its log-probs drift from the generator's:

* `mrope_position_ids`: the (temporal, height, width) position of each token, as HF's
  `get_rope_index` computes it for images. Text tokens count up equally on the three axes; the
  tokens of an image take their merged-grid coordinates offset by the position where the image
  starts, and the text after it resumes at start + max(grid_h, grid_w) / merge, not at start +
  number of image tokens.
* `mrope_angles`: the rotary angle of each token and frequency, INTERLEAVED over the axes as
  Qwen3-VL and Qwen3.5 do (frequency i reads the axis i mod 3 within `mrope_section`), not in
  the contiguous sections of Qwen2-VL that megatron-core's MultimodalRotaryEmbedding implements.

Both are pure functions of their inputs; tests/rl/test_mrope.py checks them against HF.
"""

from __future__ import annotations

import torch

__all__ = ["DEFAULT_MROPE_SECTION", "mrope_angles", "mrope_position_ids", "mrope_section_of"]

DEFAULT_MROPE_SECTION = (11, 11, 10)  # HF Qwen3.5's default: frequencies per (t, h, w) axis


def mrope_section_of(text_config) -> tuple[int, int, int]:
    """The config's `rope_parameters.mrope_section`, else HF's default."""
    rope = dict(getattr(text_config, "rope_parameters", None) or {})
    return tuple(rope.get("mrope_section") or DEFAULT_MROPE_SECTION)


def mrope_position_ids(input_ids: torch.Tensor, attention_mask: torch.Tensor, image_grid_thw: torch.Tensor | None,
                       *, image_token_id: int, spatial_merge_size: int) -> torch.Tensor:
    """[3, B, T] long positions for right-padded rows; padding gets 0 (as in HF).

    Args:
        input_ids: [B, T]; a run of `image_token_id` is one image, consuming the next row of
            `image_grid_thw` (images in row order, then left to right).
        attention_mask: [B, T], 1 on real tokens.
        image_grid_thw: [num_images, 3] patch grids (before merging); None for text only.
    """
    rows, length = input_ids.shape
    out = torch.zeros(3, rows, length, dtype=torch.long)
    grids = iter(image_grid_thw.tolist() if image_grid_thw is not None else [])
    for b in range(rows):
        valid = attention_mask[b].bool().cpu()
        ids = input_ids[b].cpu()[valid]
        is_image = (ids == image_token_id).tolist()
        pieces, pos, i = [], 0, 0
        while i < len(is_image):
            j = i
            while j < len(is_image) and is_image[j] == is_image[i]:
                j += 1
            if not is_image[i]:
                pieces.append(torch.arange(pos, pos + j - i).expand(3, -1))
                pos += j - i
            else:
                try:
                    t, h, w = next(grids)
                except StopIteration:
                    raise ValueError(f"row {b}: more image token runs than rows of image_grid_thw") from None
                gt, gh, gw = t, h // spatial_merge_size, w // spatial_merge_size
                if gt * gh * gw != j - i:
                    raise ValueError(f"row {b}: {j - i} image tokens for a merged grid of {gt}x{gh}x{gw}")
                tt, hh, ww = torch.meshgrid(torch.arange(gt), torch.arange(gh), torch.arange(gw), indexing="ij")
                pieces.append(torch.stack([tt, hh, ww]).reshape(3, -1) + pos)
                pos += max(h, w) // spatial_merge_size
            i = j
        if pieces:
            out[:, b, valid] = torch.cat(pieces, dim=1)
    return out


def mrope_angles(position_ids: torch.Tensor, inv_freq: torch.Tensor, mrope_section) -> torch.Tensor:
    """[B, T, 2F] rotary angles (the rotate-half layout `cat(a, a)`) for [3, B, T] positions and
    F = len(inv_freq) frequencies, interleaved over the axes as HF Qwen3.5 does."""
    angles = position_ids[..., None].to(torch.float32) * inv_freq.to(torch.float32)  # [3, B, T, F]
    out = angles[0].clone()
    for axis, offset in ((1, 1), (2, 2)):
        idx = slice(offset, mrope_section[axis] * 3, 3)
        out[..., idx] = angles[axis, ..., idx]
    return torch.cat((out, out), dim=-1)
