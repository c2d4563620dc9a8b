"""Context parallelism for the megatron backend's local (non-Transformer-Engine) layer spec.

megatron-core runs context parallelism only inside Transformer Engine's attention (ring
attention); its local DotProductAttention asserts cp == 1, and neither our CPU machines nor the
lent GPU machine have TE. This module supplies the all-gather form of context parallelism
(as in the Llama 3 report): each CP rank holds a slice of every sequence, gathers the keys and
values of the whole sequence inside attention, and attends with its own queries. Everything
outside attention (projections, MLP, MoE, norms) is per token and runs on the local slice.

Load balance: a causal sequence is cut into 2 x cp chunks and rank r holds chunks r and
2cp - 1 - r (megatron's own layout), so every rank gets the same amount of attention work.

    index = token_index(total, cp, rank)              # this rank's token positions
    mask = attention_mask(total, cp, rank)            # [1, 1, local, total], True = masked
    logits = model(input_ids[:, index], ..., attention_mask=mask)
    full = gather_tokens(local_values, total, ...)    # [B, total], backward: this rank's slice

Gradients: each CP rank computes the loss of the WHOLE sequence from the gathered log-probs;
`gather_tokens` passes back only the local slice's gradient, so a rank's parameter gradient is
its tokens' share, and megatron's DDP sums the shares over the data-parallel x CP group.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.distributed as dist

from rl.backends.megatron.mcore import DotProductAttention, ps

__all__ = ["ContextParallelAttention", "attention_mask", "gather_tokens", "token_index"]


def token_index(total: int, cp_size: int, cp_rank: int) -> torch.Tensor:
    """Positions (ascending) of the tokens rank `cp_rank` holds: chunks r and 2cp-1-r of 2cp."""
    if total % (2 * cp_size):
        raise ValueError(f"sequence length {total} is not a multiple of 2 x cp = {2 * cp_size}")
    chunk = total // (2 * cp_size)
    first, second = cp_rank, 2 * cp_size - 1 - cp_rank
    return torch.cat([torch.arange(first * chunk, (first + 1) * chunk),
                      torch.arange(second * chunk, (second + 1) * chunk)])


def gathered_index(total: int, cp_size: int) -> torch.Tensor:
    """Positions of the keys after an all-gather over the CP group (rank 0's tokens first)."""
    return torch.cat([token_index(total, cp_size, r) for r in range(cp_size)])


def attention_mask(total: int, cp_size: int, cp_rank: int, device=None) -> torch.Tensor:
    """[1, 1, local, total] causal mask (True = may not attend) of this rank's queries against
    the gathered keys."""
    queries = token_index(total, cp_size, cp_rank)
    keys = gathered_index(total, cp_size)
    return (keys[None, :] > queries[:, None])[None, None].to(device)


class _GatherTokens(torch.autograd.Function):
    """All-gather along dim 1 ([B, local] -> [B, total] in position order); backward: the local
    slice of the incoming gradient (every rank holds the same full-sequence loss)."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, total: int, order: torch.Tensor, index: torch.Tensor, group,
                cp_size: int) -> torch.Tensor:
        parts = [torch.empty_like(local) for _ in range(cp_size)]
        dist.all_gather(parts, local.contiguous(), group=group)
        out = local.new_empty(local.shape[0], total, *local.shape[2:])
        out[:, order.to(local.device)] = torch.cat(parts, dim=1)
        ctx.index = index.to(local.device)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad[:, ctx.index], None, None, None, None, None


def gather_tokens(local: torch.Tensor, total: int,
                  rank_index: Callable[[int], torch.Tensor] | None = None) -> torch.Tensor:
    """[B, local, ...] values of this rank's tokens -> [B, total, ...] for the whole sequence.
    `rank_index(r)`: the positions rank r holds (default `token_index`; packed rows have their own,
    rl/backends/megatron/packed_context.py)."""
    cp_size = ps.get_context_parallel_world_size()
    if cp_size == 1:
        return local
    if rank_index is None:
        def rank_index(r: int) -> torch.Tensor:
            return token_index(total, cp_size, r)
    order = torch.cat([rank_index(r) for r in range(cp_size)])
    return _GatherTokens.apply(local, total, order, rank_index(ps.get_context_parallel_rank()),
                               ps.get_context_parallel_group(), cp_size)


class _GatherKV(torch.autograd.Function):
    """All-gather keys/values [s_local, ...] -> [s_local * cp, ...] over the CP group;
    backward sums every rank's gradient of the gathered tensor and keeps this rank's part."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, group, cp_size: int, cp_rank: int) -> torch.Tensor:
        ctx.group, ctx.cp_rank, ctx.size = group, cp_rank, local.shape[0]
        parts = [torch.empty_like(local) for _ in range(cp_size)]
        dist.all_gather(parts, local.contiguous(), group=group)
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        start = ctx.cp_rank * ctx.size
        return grad[start:start + ctx.size], None, None, None


class ContextParallelAttention(DotProductAttention):
    """megatron's local DotProductAttention over the keys and values of the whole sequence.

    The mask it gets is `attention_mask(...)` of this rank (local queries x gathered keys); packed
    rows (THD) bring theirs from rl/backends/megatron/packed_context.py."""

    def __init__(self, config, *args, **kwargs) -> None:
        local = copy.copy(config)
        local.context_parallel_size = 1  # the parent refuses cp > 1; attention itself is local
        super().__init__(local, *args, **kwargs)
        self.cp_group = ps.get_context_parallel_group()
        self.cp_size = ps.get_context_parallel_world_size()
        self.cp_rank = ps.get_context_parallel_rank()

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        if packed_seq_params is not None:  # THD [t, heads, dim]: one row of t tokens, masked by its mask
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            return self.forward(query, key, value, attention_mask, attn_mask_type=attn_mask_type,
                                attention_bias=attention_bias).squeeze(1)
        key = _GatherKV.apply(key, self.cp_group, self.cp_size, self.cp_rank)
        value = _GatherKV.apply(value, self.cp_group, self.cp_size, self.cp_rank)
        return super().forward(query, key, value, attention_mask, attn_mask_type=attn_mask_type,
                               attention_bias=attention_bias, packed_seq_params=packed_seq_params)
