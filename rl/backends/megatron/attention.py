"""Core attention through torch's `scaled_dot_product_attention` (flash on a GPU), in place of
megatron's local `DotProductAttention`.

megatron-core's local spec (no Transformer Engine) computes attention unfused: a [b*np, s, s]
score matrix, a masked softmax from a [1, 1, s, s] boolean mask and a second batched matmul.
On H200 that was a large share of the step (docs/megatron.md, "Throughput"). Causal attention
over right-padded rows needs no mask at all: `is_causal=True` lets SDPA pick the flash kernel.
An explicit mask (megatron's convention: True = masked out) still works, through SDPA's own.
Packed rows (rl/backends/megatron/packed.py) come as megatron's THD layout, the packed rows one
after another in one row; with them comes their block-diagonal mask [P, 1, W, W], so attention
runs as P rows of W, as padded rows would.
"""

from __future__ import annotations

import torch.nn.functional as F

from rl.backends.megatron.mcore import DotProductAttention

__all__ = ["SDPAttention"]


class SDPAttention(DotProductAttention):
    """Same interface and parameters as DotProductAttention: query [sq, b, np, hn], key and value
    [sk, b, ng, hn] -> [sq, b, np * hn]; with `packed_seq_params` (THD) query [t, np, hn], key and
    value [t, ng, hn] and a [P, 1, W, W] mask (t = P * W) -> [t, np * hn]."""

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        if attention_bias is not None:
            raise ValueError("SDPAttention: attention bias is not supported")
        if packed_seq_params is not None:
            if attention_mask is None or attention_mask.shape[0] * attention_mask.shape[-1] != query.shape[0]:
                raise ValueError("SDPAttention: packed rows need their [P, 1, W, W] mask (megatron/packed.py)")
            rows, width = attention_mask.shape[0], attention_mask.shape[-1]
            query, key, value = (t.reshape(rows, width, *t.shape[1:]).transpose(0, 1) for t in (query, key, value))
            out = self.forward(query, key, value, attention_mask)  # [W, P, np * hn]
            return out.transpose(0, 1).reshape(rows * width, -1)
        groups = self.num_attention_heads_per_partition // self.num_query_groups_per_partition
        if groups > 1:
            key = key.repeat_interleave(groups, dim=2)
            value = value.repeat_interleave(groups, dim=2)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, heads, s, hn]
        mask = None if attention_mask is None else ~attention_mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                             scale=self.softmax_scale)
        sq, b = query.shape[0], query.shape[1]
        return out.permute(2, 0, 1, 3).reshape(sq, b, -1)
