"""How one forward's rows become megatron-core's inputs: text, vision-language, packed, packed under
context parallelism, one small class each, chosen once when the backend is built.

Why: the backend ran every layout through one method that asked the model kind, the packing and
the context-parallel size on every call. Now `input_layouts` picks a padded layout (text rows, or
vision-language rows with M-RoPE positions and image inputs) and, with sequence packing, a packed
one (plain, or split over the CP ranks); a forward whose rows were not packed takes the padded one.

Each layout's `prepare(mb, images, packing)` gives the model's keyword inputs, the map from this
rank's logits to the rows' [B, T] log-probs, and the forward's sequence length and micro-batch
size (the pipeline schedule's activation shape). `next_logprobs(logits, labels)` is the backend's
each-token log-prob of its label over this rank's vocabulary shard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl.backends.megatron import context as mctx
from rl.backends.megatron import packed as mpack
from rl.backends.megatron import packed_context as mpcp
from rl.backends.megatron.mcore import ps
from rl.config import ParallelConfig
from rl.data.errors import DataIntegrityError
from rl.models.packing import Packing

__all__ = ["InputLayout", "input_layouts"]

NextLogprobs = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Prepared = tuple[dict[str, Any], Callable[[torch.Tensor], torch.Tensor], int, int]


class InputLayout:
    """A layout: `prepare` one forward's micro-batch."""

    def __init__(self, parallel: ParallelConfig, device: Callable[[], torch.device], next_logprobs: NextLogprobs):
        self.parallel, self.device, self.next_logprobs = parallel, device, next_logprobs

    @property
    def sp_multiple(self) -> int:
        """Sequence parallelism splits a row's tokens evenly over TP."""
        return self.parallel.tp if self.parallel.sp else 1

    def prepare(self, mb: dict[str, torch.Tensor], images: tuple[str, ...], packing: Packing | None) -> Prepared:
        raise NotImplementedError


class TextRows(InputLayout):
    """Right-padded rows, padded further to a multiple of TP (sequence parallel) x 2CP (context
    parallel); a CP rank runs its share of the tokens (`rl.backends.megatron.context`)."""

    def prepare(self, mb, images, packing):
        ids, mask = mb["input_ids"].cpu(), mb["attention_mask"].cpu()  # index arithmetic on the host, sent once
        cp = self.parallel.cp
        total = ids.shape[1] + (-ids.shape[1]) % (self.sp_multiple * (2 * cp if cp > 1 else 1))
        ids_p = torch.nn.functional.pad(ids, (0, total - ids.shape[1]))
        dev = self.device()
        if cp > 1:
            index = mctx.token_index(total, cp, ps.get_context_parallel_rank())
            causal = mctx.attention_mask(total, cp, ps.get_context_parallel_rank(), dev)
        else:  # SDPAttention: causal without a mask
            index, causal = torch.arange(total), None
        inputs = dict(position_ids=self.positions(ids_p, mask, {f: mb[f].cpu() for f in images})[..., index].to(dev),
                      attention_mask=causal, **self.token_inputs(ids_p, index, {f: mb[f] for f in images}, dev))
        labels = torch.nn.functional.pad(ids_p[:, 1:], (0, 1))[:, index].to(dev)  # each token's next token
        rows, length = mask.shape
        scored = mask[:, 1:].to(dev, torch.float32)  # here, not in to_logprobs: no copy between forward and backward

        def to_logprobs(logits: torch.Tensor) -> torch.Tensor:
            """[B, T] fp32, out[:, 0] = 0, 0 on padding (the HF `token_logprobs` contract); whole rows
            gathered over CP, on the logits' device (the loss is computed there)."""
            next_lp = mctx.gather_tokens(self.next_logprobs(logits, labels), total)
            lp = next_lp[:, : length - 1] * scored
            return torch.cat([lp.new_zeros(rows, 1), lp], dim=1)

        return inputs, to_logprobs, total, rows

    def positions(self, ids: torch.Tensor, mask: torch.Tensor, images: dict[str, torch.Tensor]) -> torch.Tensor:
        if images:
            raise DataIntegrityError(f"image columns {sorted(images)} for a text model")
        return torch.arange(ids.shape[1]).expand(3, ids.shape[0], -1)  # M-RoPE of text: equal axes

    def token_inputs(self, ids: torch.Tensor, index: torch.Tensor, images: dict[str, torch.Tensor],
                     dev: torch.device) -> dict[str, Any]:
        return {"input_ids": ids[:, index].to(dev)}


class VisionRows(TextRows):
    """Text rows of a vision-language model: M-RoPE positions from the image grids, the whole rows
    to the model (it scatters the image features, then keeps this CP rank's tokens), the images'
    patches flattened."""

    def __init__(self, parallel: ParallelConfig, device: Callable[[], torch.device], next_logprobs: NextLogprobs,
                 position_ids: Callable[..., torch.Tensor]):
        super().__init__(parallel, device, next_logprobs)
        self.position_ids = position_ids

    def positions(self, ids, mask, images):
        pad = ids.shape[1] - mask.shape[1]
        return self.position_ids(ids, torch.nn.functional.pad(mask, (0, pad)), images.get("image_grid_thw"))

    def token_inputs(self, ids, index, images, dev):
        out: dict[str, Any] = {"input_ids": ids.to(dev), "token_index": index.to(dev) if self.parallel.cp > 1 else None}
        if "pixel_values" in images:
            pixels = images["pixel_values"].cpu()
            out.update(pixel_values=pixels.reshape(-1, pixels.shape[-1]).to(dev),
                       image_grid_thw=images["image_grid_thw"].cpu().to(dev))
        return out


class PackedRows(InputLayout):
    """Rows packed end to end into one sequence (megatron's THD layout: `rl.backends.megatron.packed`)."""

    def prepare(self, mb, images, packing):
        dev = self.device()
        inputs, labels = mpack.packed_inputs(packing, mb["input_ids"].cpu(), dev)
        on_device = packing.to(dev)  # here, not in the map from logits: no copy between forward and backward
        return (inputs, lambda logits: mpack.unpacked_logprobs(self.next_logprobs(logits, labels), on_device),
                labels.shape[1], 1)


class PackedContextRows(InputLayout):
    """Packed rows with each sequence split over the CP ranks (`rl.backends.megatron.packed_context`)."""

    def prepare(self, mb, images, packing):
        inputs, labels, layout = mpcp.packed_inputs(
            packing, mb["input_ids"].cpu(), self.device(), cp=self.parallel.cp, rank=ps.get_context_parallel_rank(),
            multiple=self.sp_multiple)
        return (inputs, lambda logits: mpcp.unpacked_logprobs(self.next_logprobs(logits, labels), layout, packing),
                layout.size, 1)


def input_layouts(parallel: ParallelConfig, device: Callable[[], torch.device], next_logprobs: NextLogprobs, *,
                  position_ids: Callable[..., torch.Tensor] | None, packing: bool
                  ) -> tuple[InputLayout, InputLayout | None]:
    """(the padded layout, the packed one or None): `position_ids` is a vision-language model's
    M-RoPE (None: text rows); `packing`: `policy.sequence_packing.enabled`."""
    padded = (TextRows(parallel, device, next_logprobs) if position_ids is None
              else VisionRows(parallel, device, next_logprobs, position_ids))
    packed = None
    if packing:
        packed = (PackedContextRows if parallel.cp > 1 else PackedRows)(parallel, device, next_logprobs)
    return padded, packed
