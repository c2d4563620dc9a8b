"""Packed rows (`policy.sequence_packing`) on the megatron backend, through megatron's THD layout.

The plan is the torch backend's (rl/models/packing.py). A forward's P packed rows of W tokens go
in as ONE row of P*W tokens with `PackedSeqParams(qkv_format="thd")`, cut at every sequence and
at every run of padding (`cu_seqlens`). Three things keep the sequences apart:
* positions restart per sequence: the rotary angles are each token's own (`Packing.positions` as
  per-token position ids; megatron's THD rotary reads per-token angles at each cut's offset);
* the gated-delta-net layers hand the cuts to fla's varlen kernels (on a CPU the torch
  stand-ins run each sequence on its own, rl/backends/megatron/shims.py): no conv window or
  recurrent state crosses a cut;
* attention is ours (`SDPAttention`): it takes the P packed rows back out of the one row and
  applies `Packing.attention_mask`, causal within each sequence.
Each log-prob returns to its row's place (`Packing.unpack`), so the loss sees the unpacked rows.
A packed row's width is rounded up to a multiple of TP under sequence parallelism (the one row
is scattered over the TP ranks in equal parts).
"""

from __future__ import annotations

from typing import Any

import torch

from rl.backends.megatron.mcore import PackedSeqParams
from rl.models.packing import Packing

__all__ = ["cu_seqlens", "packed_inputs", "unpacked_logprobs"]


def cu_seqlens(packing: Packing) -> torch.Tensor:
    """[S + 1] int32: where each sequence, and each run of padding, starts in the one row of P*W
    tokens, and its end."""
    sequence = packing.sequence.reshape(-1)
    starts = torch.ones_like(sequence, dtype=torch.bool)
    starts[1:] = sequence[1:] != sequence[:-1]
    starts[::packing.packed_shape[1]] = True  # a packed row's padding and the next row's are two runs
    cuts = torch.nonzero(starts).reshape(-1)
    return torch.cat([cuts, cuts.new_tensor([sequence.numel()])]).to(torch.int32)


def packed_inputs(packing: Packing, ids: torch.Tensor, device: torch.device) -> tuple[dict[str, Any], torch.Tensor]:
    """GPTModel's keyword inputs for the rows `ids` [B, T] laid out as `packing` says, and each
    packed token's next token (labels [1, P*W]; the last of a packed row gets 0, never read)."""
    packed = packing.pack(ids)
    labels = torch.nn.functional.pad(packed[:, 1:], (0, 1)).reshape(1, -1)
    cuts = cu_seqlens(packing)
    longest = int((cuts[1:] - cuts[:-1]).max())  # on the host: a device max would wait for the GPU
    cuts = cuts.to(device)
    params = PackedSeqParams(qkv_format="thd", cu_seqlens_q=cuts, cu_seqlens_kv=cuts,
                             max_seqlen_q=longest, max_seqlen_kv=longest)
    inputs = dict(input_ids=packed.reshape(1, -1).to(device),
                  position_ids=packing.positions.reshape(1, -1).expand(3, 1, -1).to(device),  # M-RoPE: equal axes
                  attention_mask=(~packing.attention_mask()).to(device),  # megatron's mask: True = masked out
                  packed_seq_params=params)
    return inputs, labels.to(device)


def unpacked_logprobs(next_lp: torch.Tensor, packing: Packing) -> torch.Tensor:
    """[B, T] fp32 log-probs (out[:, 0] = 0, 0 on padding) from each packed token's next-token
    log-prob [1, P*W]: token t's is its predecessor's, read only within a sequence. `packing` is on
    next_lp's device (moved before the forward: a copy from the host here would wait for the GPU)."""
    rows, width = packing.packed_shape
    next_lp = next_lp.reshape(rows, width)
    lp = torch.cat([next_lp.new_zeros(rows, 1), next_lp[:, :-1]], dim=1)
    return packing.unpack(torch.where(packing.scored(), lp, torch.zeros_like(lp)))
