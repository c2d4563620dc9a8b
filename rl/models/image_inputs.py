"""Image inputs of a Qwen3.5 vision-language model: patches, placeholder tokens, forward kwargs.

The engine keeps image data ROW-ALIGNED, like every other column: `pixel_values` is
[B, N, C*T*P*P] (N patches per image, every image of a task the same size) and
`image_grid_thw` is [B, 3]. Sharding, micro-batching and padding with copies of a row then
work unchanged; `image_forward_kwargs` flattens them into the model's packed form
([B*N, D] patches, [B, 3] grids) and adds `mm_token_type_ids`, which the VL classes need for
their multimodal rotary positions (1 on image placeholder tokens, 0 elsewhere).

Patch layout (what the Qwen-VL vision tower expects): the image is repeated
`temporal_patch_size` times along time, cut into P x P patches, and the patches are listed
block-major over `spatial_merge_size`^2 windows (the order of
`transformers.vision_utils.get_vision_position_ids`), each patch flattened as (C, T, P, P).
Pixels are scaled to [-1, 1] (mean 0.5, std 0.5, as the Qwen3-VL image processor does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl.data.errors import DataIntegrityError

__all__ = ["IMAGE_FIELDS", "ImageLayout", "PromptBatch", "encode_prompts", "image_forward_kwargs",
           "patchify", "prompt_rows"]

IMAGE_FIELDS = ("pixel_values", "image_grid_thw")  # the row-aligned image columns


@dataclass(frozen=True, kw_only=True)
class ImageLayout:
    """How images become patches and placeholder tokens for one model."""

    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    image_token_id: int
    vision_start_token_id: int
    vision_end_token_id: int

    @classmethod
    def of(cls, model_or_config: Any) -> ImageLayout | None:
        """The layout of a VL model (or its config); None for a text-only model."""
        config = getattr(model_or_config, "config", model_or_config)
        vision = getattr(config, "vision_config", None)
        if vision is None:
            return None
        return cls(patch_size=int(vision.patch_size), temporal_patch_size=int(vision.temporal_patch_size),
                   spatial_merge_size=int(vision.spatial_merge_size), image_token_id=int(config.image_token_id),
                   vision_start_token_id=int(config.vision_start_token_id),
                   vision_end_token_id=int(config.vision_end_token_id))

    def grid_thw(self, height: int, width: int) -> tuple[int, int, int]:
        """(t, h, w) patches of one image; each side must be a multiple of patch x merge."""
        unit = self.patch_size * self.spatial_merge_size
        if height % unit or width % unit:
            raise ValueError(
                f"task.params.image_size: images of {height}x{width} pixels do not tile into "
                f"{unit}-pixel windows (model.config.vision_config patch_size x spatial_merge_size)")
        return 1, height // self.patch_size, width // self.patch_size

    def num_image_tokens(self, height: int, width: int) -> int:
        """Placeholder tokens of one image: one per merged window."""
        t, h, w = self.grid_thw(height, width)
        return t * h * w // self.spatial_merge_size ** 2


def patchify(images: torch.Tensor, layout: ImageLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images [B, H, W, 3] -> (pixel_values [B, N, 3*T*P*P] float32, image_grid_thw [B, 3])."""
    if images.dim() != 4 or images.shape[-1] != 3 or images.dtype != torch.uint8:
        raise ValueError(f"images must be uint8 [B, H, W, 3], got {images.dtype} {tuple(images.shape)}")
    B, H, W, C = images.shape
    _, gh, gw = layout.grid_thw(H, W)
    P, T, m = layout.patch_size, layout.temporal_patch_size, layout.spatial_merge_size
    x = (images.permute(0, 3, 1, 2).to(torch.float32) / 255.0 - 0.5) / 0.5       # [B, C, H, W]
    x = x.unsqueeze(1).expand(B, T, C, H, W)                                    # repeat in time
    x = x.reshape(B, T, C, gh // m, m, P, gw // m, m, P)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)                                    # windows, then (C, T, P, P)
    pixel_values = x.reshape(B, gh * gw, C * T * P * P).contiguous()
    grid = torch.tensor([[1, gh, gw]], dtype=torch.long).expand(B, 3).clone()
    return pixel_values, grid


@dataclass(kw_only=True)
class PromptBatch:
    """Right-padded prompt token ids [B, P] (P: the longest), each row's length, and, for image
    tasks, the row-aligned image columns."""

    input_ids: torch.Tensor
    lengths: torch.Tensor
    images: dict[str, torch.Tensor] | None = None

    def columns(self) -> dict[str, torch.Tensor]:
        """The image columns to carry with each row ({} for text)."""
        return dict(self.images or {})


def _text_ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    return tokenizer(list(texts), add_special_tokens=False)["input_ids"]


def prompt_rows(tokenizer: Any, problems: Sequence[Any],
                layout: ImageLayout | None) -> tuple[list[list[int]], dict[str, torch.Tensor] | None]:
    """Token ids of each prompt (lengths may differ) and the image columns (None for text).

    An image problem's prompt is `<|vision_start|> <|image_pad|> x n <|vision_end|>` then its text.
    """
    texts = _text_ids(tokenizer, [p.prompt for p in problems])
    images = [getattr(p, "image", None) for p in problems]
    if all(img is None for img in images):
        return texts, None
    if layout is None or any(img is None for img in images):
        raise ValueError("model.modality: image tasks need model.modality: vision (and every problem an image)")
    if len({tuple(img.shape) for img in images}) != 1:
        raise ValueError("task: every image of a batch must have the same size")
    H, W = images[0].shape[:2]
    head = [layout.vision_start_token_id] + [layout.image_token_id] * layout.num_image_tokens(H, W)
    pixel_values, grid = patchify(torch.stack(images), layout)
    rows = [head + [layout.vision_end_token_id] + t for t in texts]
    return rows, {"pixel_values": pixel_values, "image_grid_thw": grid}


def encode_prompts(tokenizer: Any, problems: Sequence[Any], layout: ImageLayout | None) -> PromptBatch:
    """Prompt ids [B, P] for the sampler (see `prompt_rows`), right-padded with the tokenizer's pad, with
    their lengths and the image columns.

    Raises:
        ValueError: image problems for a text model.
    """
    rows, images = prompt_rows(tokenizer, problems, layout)
    width, pad = max(len(r) for r in rows), tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
    return PromptBatch(input_ids=ids, lengths=torch.tensor([len(r) for r in rows], dtype=torch.long), images=images)


def image_forward_kwargs(model: Any, input_ids: torch.Tensor, pixel_values: torch.Tensor | None,
                         image_grid_thw: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Keyword arguments that give a VL model the images of rows `input_ids` ({} without images).

    Also forgets the rotary offsets a VL model kept from its last prompt with images: HF's
    Qwen3.5-VL stores them at prefill and adds them to every later decode step, so a batch without
    images decoded after one with images would continue from the earlier rows' layouts."""
    inner = getattr(model, "model", None)
    if getattr(inner, "rope_deltas", None) is not None:
        inner.rope_deltas = None
    if pixel_values is None:
        if image_grid_thw is not None:
            raise DataIntegrityError("image_grid_thw without pixel_values")
        return {}
    if pixel_values.dim() != 3 or pixel_values.shape[0] != input_ids.shape[0]:
        raise DataIntegrityError(f"pixel_values {tuple(pixel_values.shape)} is not row-aligned "
                                 f"with input_ids {tuple(input_ids.shape)}")
    image_token_id = model.config.image_token_id
    return {"pixel_values": pixel_values.reshape(-1, pixel_values.shape[-1]),
            "image_grid_thw": image_grid_thw,
            "mm_token_type_ids": (input_ids == image_token_id).to(torch.int32)}
