"""Token log-probs of packed rows (rl/models/packing.py) through a Hugging Face causal LM, put
back in the unpacked layout.

Three things keep the sequences of a packed row apart, so each token sees what it would see in
a row of its own:
* positions restart at 0 for every sequence; a vision-language model's multimodal rotary
  positions are each row's own (rl/models/mrope.py), packed alongside, and its images are
  handed over in packed order;
* full attention gets a block-diagonal causal mask (SDPA or eager attention);
* Qwen3.5's gated-delta-net layers (a causal conv1d and a recurrent state along the sequence)
  run each sequence on its own: hooks regroup the layer's packed input into one row per
  sequence (zero-padded to the longest), the layer runs as Hugging Face wrote it, and its
  output returns to the packed places. No state or conv window crosses a boundary; those
  layers do the work of the unpacked rows cut to the longest, while attention, MLPs, experts
  and the LM head run packed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from rl.models.logprobs import gather_logprobs
from rl.models.mrope import mrope_position_ids
from rl.models.packing import Packing

__all__ = ["packed_token_logprobs"]

ATTENTION = ("sdpa", "eager")  # the implementations that take a 4D mask as given


@dataclass(frozen=True)
class _Sequences:
    """Each sequence's flat packed places ([S, L], `Packing.sequence_index`): what a
    gated-delta-net layer receives as its mask, and how its hooks regroup."""

    index: torch.Tensor
    valid: torch.Tensor

    def split(self, packed: torch.Tensor) -> torch.Tensor:
        """[P, W, H] -> [S, L, H] (padding zero)."""
        rows = packed.reshape(-1, packed.shape[-1])[self.index]
        return rows * self.valid[..., None].to(rows.dtype)

    def merge(self, rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """[S, L, H] -> the packed shape of `like` (packed padding zero)."""
        out = rows.new_zeros(like.shape[0] * like.shape[1], rows.shape[-1])
        return out.index_put((self.index[self.valid],), rows[self.valid]).reshape(*like.shape[:2], -1)


_HOOKED = "_rl_sequence_hooks"
_PENDING = "_rl_packed_input"


def _to_sequences(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    sequences = kwargs.get("attention_mask")
    if not isinstance(sequences, _Sequences):
        return None
    if args:
        hidden, args = args[0], args[1:]
    else:
        hidden = kwargs.pop("hidden_states")
    module.__dict__[_PENDING] = (sequences, hidden)  # for _to_packed, the same call's post-hook
    return args, {**kwargs, "hidden_states": sequences.split(hidden), "attention_mask": sequences.valid}


def _to_packed(module: torch.nn.Module, args: tuple, kwargs: dict, output: torch.Tensor) -> torch.Tensor | None:
    pending = module.__dict__.pop(_PENDING, None)
    if pending is None:
        return None
    sequences, hidden = pending
    return sequences.merge(output, hidden)


def _hook_sequence_layers(model: torch.nn.Module) -> bool:
    """Give every gated-delta-net layer the regrouping hooks (once); whether the model has any."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeGatedDeltaNet

    found = False
    for module in model.modules():
        if isinstance(module, (Qwen3_5GatedDeltaNet, Qwen3_5MoeGatedDeltaNet)):
            found = True
            if not module.__dict__.get(_HOOKED):
                module.register_forward_pre_hook(_to_sequences, with_kwargs=True)
                module.register_forward_hook(_to_packed, with_kwargs=True)
                module.__dict__[_HOOKED] = True
    return found


def _attention_mask(model: PreTrainedModel, packing: Packing, dtype: torch.dtype) -> torch.Tensor:
    implementation = model.config._attn_implementation
    if implementation not in ATTENTION:
        raise ValueError(f"policy.sequence_packing: the model's attention is {implementation!r}; packing "
                         f"needs one that takes a block-diagonal mask ({', '.join(ATTENTION)})")
    allowed = packing.attention_mask()
    if implementation == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def _image_kwargs(model: PreTrainedModel, packing: Packing, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  pixel_values: torch.Tensor, image_grid_thw: torch.Tensor) -> dict[str, torch.Tensor]:
    """A vision-language model's images in packed order, and its (text, t, h, w) positions."""
    config = model.config
    mrope = mrope_position_ids(input_ids, attention_mask, image_grid_thw, image_token_id=config.image_token_id,
                               spatial_merge_size=config.vision_config.spatial_merge_size).to(input_ids.device)
    packed = packing.pack(mrope.permute(1, 2, 0)).permute(2, 0, 1)  # [3, P, W]
    order = torch.tensor(packing.order, device=pixel_values.device)
    return {"position_ids": torch.cat([packing.positions[None], packed]),
            "pixel_values": pixel_values[order].reshape(-1, pixel_values.shape[-1]),
            "image_grid_thw": image_grid_thw[order]}


def packed_token_logprobs(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          packing: Packing, *, pixel_values: torch.Tensor | None = None,
                          image_grid_thw: torch.Tensor | None = None) -> torch.Tensor:
    """`rl.models.token_logprobs` of rows laid out as `packing` says: one forward of the packed
    rows, each token's log-prob back at its row and column ([B, T] float32, out[:, 0] = 0,
    padding 0). Differentiable.

    Args:
        input_ids, attention_mask: [B, T], right-padded (the mask a prefix of ones per row),
            the rows `packing` was planned for.
        packing: from `rl.models.packing` (each row's length = its mask's sum).
        pixel_values, image_grid_thw: a vision-language model's row-aligned image columns.
    """
    if input_ids.shape != attention_mask.shape or tuple(input_ids.shape) != packing.shape:
        raise ValueError(f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} "
                         f"must be the packing's rows {packing.shape}")
    if (pixel_values is None) != (image_grid_thw is None):
        raise ValueError("pixel_values and image_grid_thw come together")
    packing = packing.to(input_ids.device)
    ids = packing.pack(input_ids)
    mask = _attention_mask(model, packing, model.dtype)
    if _hook_sequence_layers(model):
        mask = {"full_attention": mask, "linear_attention": _Sequences(*packing.sequence_index())}
    kwargs = {"position_ids": packing.positions}
    if pixel_values is not None:
        kwargs = _image_kwargs(model, packing, input_ids, attention_mask, pixel_values, image_grid_thw)
    out = model(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs)
    lp = gather_logprobs(out.logits[:, :-1], ids[:, 1:])
    lp = torch.cat([lp.new_zeros(lp.shape[0], 1), lp], dim=1)
    return packing.unpack(torch.where(packing.scored(), lp, torch.zeros_like(lp)))
