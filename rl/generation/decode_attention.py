"""Grouped-query attention for the decode step: each key/value head attends once for its whole query group.

Why: with a mask (always, with a static cache) Hugging Face's sdpa attention copies every key/value
head once per query head of its group (`repeat_kv`) before calling the kernel; under
`torch.compile` it does so in the decode step too. On the decode step of a 1.2 B dense model at
batch 256 those copies were 43% of the GPU's time (bench/results/profiles/
generation_dense_1b_full_batch256_2026-12-02.txt). With one query token the copies are not needed:
the G query heads of a group become G query rows of their key/value head, [B, Hkv, G, D], and one
ordinary attention over the cache, unrepeated, gives each of them exactly what it got before, since
the rows of one query never mix. Any other shape (the prompt's forward, training) is sdpa's, as
given.

`use_grouped_decode_attention(model)` switches a model's text attention to it (the mask is sdpa's);
the generation worker does so on CUDA. With `flash=True` the one-token step runs
`rl.generation.flash_decode`'s split-K Triton kernel where it can (CUDA, Triton importable), which
reads only the cache's live keys where sdpa reads the whole static cache (the generation worker
runs it; bench/bench_generation.py `ours_graphs_sdpa` measures sdpa's kernel beside it).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from rl.generation.flash_decode import default_scale, flash_decode
from rl.generation.triton_runs import triton_runs

__all__ = ["FLASH_DECODE", "GROUPED_DECODE", "flash_decode_attention", "flash_fits", "grouped_decode_attention",
           "launch_by_batch", "use_grouped_decode_attention"]

GROUPED_DECODE = "rl_grouped_decode"  # grouped heads, sdpa's kernel
FLASH_DECODE = "rl_flash_decode"  # grouped heads, the split-K Triton kernel where it runs


def grouped_decode_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                             **kwargs) -> tuple[torch.Tensor, None]:
    """HF's attention-function contract: query [B, Hq, Lq, D], key/value [B, Hkv, Lk, D]; returns
    ([B, Lq, Hq, D], None). Query head i belongs to key/value head i // G (HF's `repeat_kv` order)."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, q_length, dim = query.shape
    if q_length != 1 or groups == 1 or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    grouped = query.reshape(batch, heads // groups, groups, dim)  # the group's query heads as query rows
    if attention_mask is not None and attention_mask.shape[1] != 1:
        raise ValueError(f"grouped decode attention needs a mask shared by the heads: {tuple(attention_mask.shape)}")
    out = torch.nn.functional.scaled_dot_product_attention(grouped, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling)
    return out.reshape(batch, heads, 1, value.shape[-1]).transpose(1, 2).contiguous(), None


def flash_fits(tensor: torch.Tensor, q_length: int, dim: int, attention_mask: torch.Tensor | None, dropout: float,
               kwargs: dict) -> bool:
    """What `flash_decode` computes: one query token (`q_length`), a boolean mask shared by the
    heads (or none), a power-of-two head size `dim`, no dropout, bias, softcap or sinks, on a
    device where Triton runs (`tensor`'s)."""
    return (q_length == 1 and dropout == 0.0 and dim >= 16 and dim & (dim - 1) == 0
            and (attention_mask is None or (attention_mask.dtype == torch.bool and attention_mask.shape[1] == 1))
            and all(kwargs.get(k) is None for k in ("position_bias", "softcap", "s_aux"))
            and triton_runs(tensor))


def flash_decode_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                           **kwargs) -> tuple[torch.Tensor, None]:
    """`grouped_decode_attention`, with the one-token step through `rl.generation.flash_decode`
    where it runs; anything else (the prompt, no Triton, a CPU) as `grouped_decode_attention`."""
    if not flash_fits(query, query.shape[2], query.shape[-1], attention_mask, dropout, kwargs):
        return grouped_decode_attention(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                        **kwargs)
    return flash_decode(query, key, value, attention_mask, default_scale(query, scaling),
                        by_batch=getattr(module, "flash_by_batch", False)), None


for _name, _function in ((GROUPED_DECODE, grouped_decode_attention), (FLASH_DECODE, flash_decode_attention)):
    AttentionInterface.register(_name, _function)
    AttentionMaskInterface.register(_name, sdpa_mask)


def use_grouped_decode_attention(model: PreTrainedModel, *, flash: bool = False) -> bool:
    """Switch the model's text attention from sdpa to `grouped_decode_attention` (`flash`:
    `flash_decode_attention`), in place; returns whether it did (a model on another
    implementation, e.g. eager, keeps it). A vision tower keeps its own."""
    text = model.config.get_text_config()
    if text._attn_implementation != "sdpa":
        return False
    text._attn_implementation_internal = FLASH_DECODE if flash else GROUPED_DECODE
    return True


def launch_by_batch(model: torch.nn.Module) -> int:
    """Launch every attention layer's `flash_decode` as `rl.generation.flash_decode.launch_for` says
    for its rows (`by_batch`), in place; returns how many layers. The generation worker's
    (bench/bench_generation.py `ours_graphs_grid_launch` measures `LAUNCH` at every batch beside it)."""
    layers = [m for m in model.modules() if hasattr(m, "num_key_value_groups") and hasattr(m, "layer_idx")]
    for module in layers:
        module.flash_by_batch = True
    return len(layers)
