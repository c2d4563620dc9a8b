"""Packed rows (`policy.sequence_packing`) under context parallelism (cp > 1), in Transformer
Engine's THD context-parallel layout.

megatron-core's GatedDeltaNet with THD and cp > 1 (its `_build_thd_cp_a2a_perm`) and its THD
rotary expect EACH packed sequence, of a length that is a multiple of 2cp, cut into 2cp chunks,
CP rank r holding chunks r and 2cp-1-r of every sequence, the sequences one after another (the
load balance of rl/backends/megatron/context.py, per sequence). So the one row of P*W packed
tokens (rl/backends/megatron/packed.py) is laid out again: every segment of it (a sequence, or a
run of padding: `packed.cu_seqlens`) grows at its end to a multiple of 2cp (x tp under sequence
parallelism: each rank's share is scattered over TP). The added tokens belong to their segment
and come after its real ones, so no real token sees them; the GatedDeltaNet gets the grown
segments as its `cu_seqlens` and reorders them with its own all-to-all. A rank runs its chunks
of every segment; attention (`context.ContextParallelAttention`) gathers every rank's keys and
masks by segment and position: a key is visible iff it is in the query's segment and not after it.
Rotary angles come for the whole row (positions restart per segment); megatron's THD rotary picks
this rank's. The next-token log-probs are gathered over the CP group (`context.gather_tokens`)
and go back to the packed rows, then to the unpacked ones (`packed.unpacked_logprobs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl.backends.megatron import context, packed
from rl.backends.megatron.mcore import PackedSeqParams
from rl.models.packing import Packing

__all__ = ["Layout", "packed_inputs", "unpacked_logprobs"]


@dataclass(frozen=True)
class Layout:
    """The grown row of N tokens. source [N]: each token's flat place in the packed P*W rows (-1
    where a segment grew); segment [N]: its segment; cuts [S + 1] int32: the segments' bounds."""

    source: torch.Tensor
    segment: torch.Tensor
    cuts: torch.Tensor
    cp: int

    @classmethod
    def of(cls, packing: Packing, *, cp: int, multiple: int = 1) -> Layout:
        """`packing`'s one row with each segment grown to a multiple of 2cp x `multiple`."""
        runs = packed.cu_seqlens(packing).long()
        lengths = runs[1:] - runs[:-1]
        step = 2 * cp * multiple
        grown = (lengths + step - 1) // step * step
        cuts = torch.cat([grown.new_zeros(1), grown.cumsum(0)])
        segment = torch.repeat_interleave(torch.arange(len(grown)), grown)
        offset = torch.arange(int(cuts[-1])) - cuts[segment]
        source = torch.where(offset < lengths[segment], runs[:-1][segment] + offset, -1)
        return cls(source=source, segment=segment, cuts=cuts.to(torch.int32), cp=cp)

    @property
    def size(self) -> int:
        return self.source.numel()

    def positions(self) -> torch.Tensor:
        """[N] each token's position in its segment (a sequence's real tokens: 0..L-1)."""
        return torch.arange(self.size) - self.cuts.long()[self.segment]

    def rank_index(self, rank: int) -> torch.Tensor:
        """Places (ascending within a segment) of CP rank `rank`'s tokens: chunks r and 2cp-1-r of
        each segment, segment after segment."""
        parts = []
        for start, end in zip(self.cuts[:-1].tolist(), self.cuts[1:].tolist()):
            half = (end - start) // (2 * self.cp)
            for chunk in (rank, 2 * self.cp - 1 - rank):
                parts.append(torch.arange(start + chunk * half, start + (chunk + 1) * half))
        return torch.cat(parts)

    def attention_mask(self, rank: int) -> torch.Tensor:
        """[1, 1, N / cp, N] bool, True = masked (megatron's convention): rank `rank`'s queries
        against the keys gathered over the CP group (rank 0's first); a key is visible iff in the
        query's segment and at or before it."""
        queries = self.rank_index(rank)
        keys = torch.cat([self.rank_index(r) for r in range(self.cp)])
        visible = (self.segment[keys][None, :] == self.segment[queries][:, None]) & (keys[None, :] <= queries[:, None])
        return (~visible)[None, None]


def packed_inputs(packing: Packing, ids: torch.Tensor, device: torch.device, *, cp: int, rank: int,
                  multiple: int = 1) -> tuple[dict[str, Any], torch.Tensor, Layout]:
    """GPTModel's keyword inputs of CP rank `rank` for the rows `ids` [B, T] packed as `packing`,
    its tokens' next tokens (labels [1, N / cp]; 0 where never read) and the layout."""
    layout = Layout.of(packing, cp=cp, multiple=multiple)
    flat = packing.pack(ids).reshape(-1)
    tokens = torch.where(layout.source >= 0, flat[layout.source.clamp(min=0)], 0)
    labels = torch.nn.functional.pad(tokens[1:], (0, 1))
    index = layout.rank_index(rank)
    longest = int((layout.cuts[1:] - layout.cuts[:-1]).max())  # on the host: a device max would wait for the GPU
    cuts = layout.cuts.to(device)
    params = PackedSeqParams(qkv_format="thd", cu_seqlens_q=cuts, cu_seqlens_kv=cuts,
                             max_seqlen_q=longest, max_seqlen_kv=longest)
    inputs = dict(input_ids=tokens[index][None].to(device),
                  position_ids=layout.positions()[None].expand(3, 1, -1).to(device),  # whole row; M-RoPE axes equal
                  attention_mask=layout.attention_mask(rank).to(device), packed_seq_params=params)
    return inputs, labels[index][None].to(device), layout


def unpacked_logprobs(next_lp: torch.Tensor, layout: Layout, packing: Packing) -> torch.Tensor:
    """[B, T] fp32 log-probs of the unpacked rows from this rank's next-token log-probs [1, N / cp]."""
    whole = context.gather_tokens(next_lp, layout.size, layout.rank_index)
    real = torch.nonzero(layout.source >= 0).reshape(-1).to(whole.device)
    rows, width = packing.packed_shape
    place = layout.source.to(whole.device)[real]
    flat = whole.new_zeros(1, rows * width).index_put((torch.zeros_like(place), place), whole[0, real])
    return packed.unpacked_logprobs(flat, packing.to(whole.device))
