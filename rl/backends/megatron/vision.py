"""Qwen3.5 vision-language models on the megatron-core backend: HF vision tower + GPTModel.

The language model is megatron-core's GPTModel (TP/EP/SP as for text); the vision tower stays
the Hugging Face module, replicated on every rank (the design of megatron's own LLaVA wrapper
and of the Qwen-VL bridges: a ~0.4 B tower is cheap next to a 35 B MoE). Both live in one
`VisionLanguageModel`, so megatron's DDP, grad clipping and optimizer treat the tower like any
replicated dense parameter: its gradient is summed over the data-parallel group and counted once
per TP group in the grad norm (TP ranks see the same rows, so their tower gradients are equal).

Forward, as HF's Qwen3_5(Moe)Model does it:
1. token embeddings [S, B, H] from megatron's embedding (vocab-parallel under TP, not yet
   scattered for sequence parallelism);
2. the tower's merged patch features replace the embeddings at `<|image_pad|>` tokens, in row
   order (HF's masked_scatter over [B, S, H]);
3. scatter to sequence-parallel regions when SP is on; GPTModel runs from `decoder_input`;
4. rotary angles from the 3-axis positions of `position_ids` (HF's `get_rope_index`), through
   the backend's `InterleavedMRoPE` (rl/backends/megatron/config.py), as for text.

Weights: HF `model.language_model.*` (+ `lm_head.weight`) go through the text conversion;
`model.visual.*` are the tower's own names under `vision_model.` (a plain copy).
"""

from __future__ import annotations

import torch

from rl.backends.megatron.mcore import MegatronModule, tensor_parallel
from rl.models.mrope import mrope_position_ids

__all__ = ["VisionLanguageModel", "join_hf", "split_hf"]

VISUAL, LANGUAGE = "model.visual.", "model.language_model."


def build_vision_tower(vl_config) -> torch.nn.Module:
    """The HF vision tower of `vl_config` (weights are loaded afterwards)."""
    from transformers import AutoModel

    return AutoModel.from_config(vl_config.vision_config).to(torch.float32)


def split_hf(hf: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """HF VL state dict -> (text dict in HF causal-LM names, the tower's own state dict)."""
    text, visual = {}, {}
    for name, tensor in hf.items():
        if name.startswith(VISUAL):
            visual[name[len(VISUAL):]] = tensor
        elif name.startswith(LANGUAGE):
            text["model." + name[len(LANGUAGE):]] = tensor
        else:
            text[name] = tensor  # lm_head.weight
    return text, visual


def join_hf(text: dict[str, torch.Tensor], visual: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `split_hf`."""
    out = {VISUAL + k: v for k, v in visual.items()}
    for name, tensor in text.items():
        out[LANGUAGE + name[len("model."):] if name.startswith("model.") else name] = tensor
    return out


class VisionLanguageModel(MegatronModule):
    """GPTModel (`language_model`) fed by the HF vision tower (`vision_model`)."""

    def __init__(self, config, *, language_model: torch.nn.Module, vision_model: torch.nn.Module | None,
                 image_token_id: int, spatial_merge_size: int) -> None:
        """`vision_model` is None on pipeline stages after the first (the tower runs on the first)."""
        super().__init__(config=config)
        self.language_model = language_model
        self.vision_model = vision_model
        self.image_token_id = int(image_token_id)
        self.spatial_merge_size = int(spatial_merge_size)
        self.pre_process, self.post_process = language_model.pre_process, language_model.post_process
        self.share_embeddings_and_output_weights = language_model.share_embeddings_and_output_weights
        # The image features go in before the sequence-parallel scatter, so we scatter ourselves.
        if self.pre_process and language_model.embedding.scatter_to_sequence_parallel:
            raise ValueError("build the GPTModel with scatter_embedding_sequence_parallel=False")

    def shared_embedding_or_output_weight(self) -> torch.Tensor:
        return self.language_model.shared_embedding_or_output_weight()

    def set_input_tensor(self, input_tensor) -> None:
        self.language_model.set_input_tensor(input_tensor)

    def position_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     image_grid_thw: torch.Tensor | None) -> torch.Tensor:
        """[3, B, S] M-RoPE positions of right-padded rows (HF's `get_rope_index`)."""
        return mrope_position_ids(input_ids.cpu(), attention_mask.cpu(),
                                  None if image_grid_thw is None else image_grid_thw.cpu(),
                                  image_token_id=self.image_token_id, spatial_merge_size=self.spatial_merge_size)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor,
                pixel_values: torch.Tensor | None = None, image_grid_thw: torch.Tensor | None = None,
                token_index: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, S', V/TP] of rows `input_ids` [B, S] with packed patches [N, D] and grids
        [images, 3]. Under context parallelism `token_index` picks this rank's S' tokens (after the
        images are placed in the whole rows); `position_ids` and the mask are of those tokens.
        Past the first pipeline stage the input is the previous stage's activations."""
        if not self.pre_process:
            return self.language_model(input_ids=None, position_ids=position_ids, attention_mask=attention_mask)
        embeds = self.language_model.embedding(input_ids=input_ids, position_ids=None)  # [S, B, H]
        if pixel_values is not None:
            tower = self.vision_model
            features = tower(pixel_values.to(next(tower.parameters()).dtype), grid_thw=image_grid_thw,
                             return_dict=True).pooler_output
            mask = input_ids == self.image_token_id
            if int(mask.sum()) != features.shape[0]:
                raise ValueError(f"{int(mask.sum())} image tokens for {features.shape[0]} image features")
            rows = embeds.transpose(0, 1)
            rows = rows.masked_scatter(mask[..., None].expand_as(rows), features.to(rows.dtype))
            embeds = rows.transpose(0, 1).contiguous()
        if token_index is not None:
            embeds = embeds.index_select(0, token_index)
        if self.config.sequence_parallel:
            embeds = tensor_parallel.scatter_to_sequence_parallel_region(embeds)
        return self.language_model(input_ids=None, position_ids=position_ids, attention_mask=attention_mask,
                                   decoder_input=embeds)
