"""The decode step's logit statistics in one pass: what the next draw and log-prob read besides the
logits, from one Triton kernel over blocks of the vocabulary.

Why: inductor reduces each of the [B, V] logits' statistics (the log-sum-exp, the drawable row max,
the two-level draw's block weights) with one program per row, a few passes over the row: 52 us a
step at batch 64 and 178 us at batch 256 for a 152k vocabulary on an H200 (2026-12-05,
bench/results/profiles/), where reading the bf16 logits once takes ~5 and ~18. Here one program per
(row, `DRAW_BLOCK` ids) reads its block once and writes four numbers: its drawable max m_b and
sum_b exp((x - m_b) / T) over the drawable ids, its max and sum_b exp(x - max) over every id; a few
[B, blocks] torch ops (which inductor fuses) combine them into `next_token_stats`' results:
block weight_b = s_b exp((m_b - M) / T) with M the drawable row max, the same sums as
`rl.generation.sampler.block_weights`' up to the order of the additions.

It runs where `rl.generation.triton_runs` says Triton does (a CUDA tensor, or the CPU under
TRITON_INTERPRET=1); elsewhere `next_token_stats` keeps its torch arithmetic.
"""

from __future__ import annotations

import torch

from rl.generation.sampler import DRAW_BLOCK

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (CI, CPU machines): the torch arithmetic runs
    triton = None

__all__ = ["combine_block_stats", "logit_block_stats"]

if triton is not None:

    @triton.jit
    def _block_stats_kernel(Logits, Banned, Out, row_stride, vocab, blocks, rows, temperature,
                            NBANNED: tl.constexpr, BLOCK: tl.constexpr):
        """Program (row b, block j): its drawable max and temperature sum, its max and plain sum;
        Out is [4, rows, blocks] float32. A block with no drawable id: max -inf, sum 0."""
        b = tl.program_id(0)
        j = tl.program_id(1)
        cols = j * BLOCK + tl.arange(0, BLOCK)
        inside = cols < vocab
        x = tl.load(Logits + b * row_stride + cols, mask=inside, other=float("-inf")).to(tl.float32)
        drawable = inside
        for i in tl.static_range(NBANNED):
            drawable = drawable & (cols != tl.load(Banned + i))
        draw_max = tl.max(tl.where(drawable, x, float("-inf")), axis=0)
        safe = tl.where(draw_max > float("-inf"), draw_max, 0.0)
        draw_sum = tl.sum(tl.where(drawable, tl.exp((x - safe) / temperature), 0.0), axis=0)
        top = tl.max(x, axis=0)
        total = tl.sum(tl.where(inside, tl.exp(x - top), 0.0), axis=0)
        at = b * blocks + j
        plane = rows * blocks
        tl.store(Out + at, draw_max)
        tl.store(Out + plane + at, draw_sum)
        tl.store(Out + 2 * plane + at, top)
        tl.store(Out + 3 * plane + at, total)


@torch.library.custom_op("rl::logit_block_stats", mutates_args=())
def logit_block_stats(logits: torch.Tensor, temperature: float, banned: torch.Tensor | None) -> torch.Tensor:
    """[4, B, blocks] float32 of `logits` [B, V] (a row-strided view is fine): per `DRAW_BLOCK` ids
    the drawable max, sum exp((x - it) / temperature) over the drawable ids, the max over every id
    and sum exp(x - it); `banned` ids (a LongTensor, or None) are not drawable. A torch op, opaque
    to `torch.compile`; Triton only (`triton_runs`)."""
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    rows, vocab = logits.shape
    blocks = -(-vocab // DRAW_BLOCK)
    out = torch.empty(4, rows, blocks, dtype=torch.float32, device=logits.device)
    nbanned = 0 if banned is None else banned.numel()
    _block_stats_kernel[(rows, blocks)](
        logits, banned if nbanned else logits, out, logits.stride(0), vocab, blocks, rows, float(temperature),
        NBANNED=nbanned, BLOCK=DRAW_BLOCK)
    return out


@logit_block_stats.register_fake
def _(logits, temperature, banned):
    return logits.new_empty(4, logits.shape[0], -(-logits.shape[1] // DRAW_BLOCK), dtype=torch.float32)


def combine_block_stats(stats: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`next_token_stats`' (lse [B] float32, drawable row max [B, 1] float32, block weights [B, blocks]
    float64) from `logit_block_stats`' [4, B, blocks]."""
    draw_max, draw_sum, top, total = stats
    row_max = draw_max.amax(dim=-1, keepdim=True)
    weights = draw_sum.double() * torch.exp((draw_max - row_max).double() / temperature)
    row_top = top.amax(dim=-1, keepdim=True)
    lse = row_top.squeeze(-1) + torch.log((total * torch.exp(top - row_top)).sum(dim=-1))
    return lse, row_max, weights

