"""The second level of the two-level draw (`rl.generation.sampler.draw_in_blocks`) as one Triton
kernel: one program per row finds the block where u x total falls, then the id inside it.

Why: in torch it is ~8 kernels a decode step (two float64 cumulative sums, two searchsorted, the
gathers and the weights of the chosen block), each a few microseconds at batch 64: ~30 us of a
~1,500 us step on an H200 (bench/results/profiles/, 2026-12-04/05), for work that reads 1.2 KB of
block weights and 2 KB of logits a row. The arithmetic is `draw_in_blocks`' own (float64 sums of
the same float32 weights, "right" searches), so the two agree except where u x total falls within
a rounding of a boundary, which the order of a scan's additions can move.

It runs where `rl.generation.triton_runs` says Triton does (a CUDA tensor, or the CPU under
TRITON_INTERPRET=1); elsewhere the torch `draw_in_blocks` runs.
"""

from __future__ import annotations

import torch

from rl.generation.sampler import DRAW_BLOCK, draw_in_blocks
from rl.generation.triton_runs import triton_runs

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (CI, CPU machines): the torch draw runs
    triton = None

__all__ = ["draw_in_blocks_kernel"]

if triton is not None:

    @triton.jit
    def _draw_kernel(Logits, Uniforms, RowMax, Blocks, Banned, Out, row_stride, block_stride, vocab, nblocks,
                     temperature, NB: tl.constexpr, NBANNED: tl.constexpr, BLOCK: tl.constexpr):
        """Program (row b): its token, from its block weights [nblocks] (float64), uniform (float64)
        and drawable row max (float32)."""
        b = tl.program_id(0)
        i = tl.arange(0, NB)
        ends = tl.cumsum(tl.load(Blocks + b * block_stride + i, mask=i < nblocks, other=0.0), axis=0)
        total = tl.sum(tl.where(i == nblocks - 1, ends, 0.0), axis=0)
        target = tl.load(Uniforms + b) * total
        block = tl.minimum(tl.sum(((ends <= target) & (i < nblocks)).to(tl.int32), axis=0), nblocks - 1)
        start = tl.sum(tl.where(i == block - 1, ends, 0.0), axis=0)  # 0 for the first block
        j = tl.arange(0, BLOCK)
        ids = block * BLOCK + j
        drawable = ids < vocab
        for k in tl.static_range(NBANNED):
            drawable = drawable & (ids != tl.load(Banned + k))
        x = tl.load(Logits + b * row_stride + ids, mask=ids < vocab, other=0.0).to(tl.float32)
        weight = tl.where(drawable, tl.exp((x - tl.load(RowMax + b)) / temperature), 0.0)
        cdf = tl.cumsum(weight.to(tl.float64), axis=0)
        at = tl.minimum(tl.sum((cdf <= target - start).to(tl.int32), axis=0), BLOCK - 1)
        tl.store(Out + b, tl.minimum(block * BLOCK + at, vocab - 1).to(tl.int64))


def draw_in_blocks_kernel(logits: torch.Tensor, temperature: float, uniforms: torch.Tensor, m: torch.Tensor,
                          blocks: torch.Tensor, banned: torch.Tensor | None = None) -> torch.Tensor:
    """`draw_in_blocks` (same arguments, [B] long ids) as one kernel where Triton runs."""
    if triton is None or not triton_runs(logits):
        return draw_in_blocks(logits, temperature, uniforms, m, blocks, banned)
    rows, vocab = logits.shape
    nblocks = blocks.shape[1]
    uniforms = uniforms.to(device=logits.device, dtype=torch.float64).contiguous()
    m = m.to(torch.float32).reshape(rows).contiguous()
    blocks = blocks.to(torch.float64)
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    if blocks.stride(1) != 1:
        blocks = blocks.contiguous()
    out = torch.empty(rows, dtype=torch.long, device=logits.device)
    nbanned = 0 if banned is None else banned.numel()
    _draw_kernel[(rows,)](logits, uniforms, m, blocks, banned if nbanned else blocks, out, logits.stride(0),
                          blocks.stride(0), vocab, nblocks, float(temperature),
                          NB=triton.next_power_of_2(nblocks), NBANNED=nbanned, BLOCK=DRAW_BLOCK)
    return out
