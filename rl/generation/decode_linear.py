"""A decode step's projection, y = x W^T for a few rows, as a Triton kernel that streams the weight
once: the candidate for the small products cuBLAS runs at 50-60% of the HBM's bandwidth.

Why: at batch 64 a decode step's products are memory-bound (each weight element read once, 64
multiply-adds on it), and cuBLAS's kernels for them reached ~2.6 TB/s on gate/up, ~1.9 on down,
~1.3 on o of the H200's 4.8 (dense_1b, 2026-12-04, docs/benchmarks.md "Generation"): 44 us a layer
where reading the layer's 99 MB takes 21. Here each program owns `block_n` output columns for
`block_m` rows and loops over K in `block_k` steps that Triton pipelines (`stages` loads in flight),
so the launch shape can give every SM several programs. Not yet the engine's: bench/decode_kernels.py
times each `Tile` against `F.linear` at issue 31's shapes before one is wired into the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl.generation.triton_runs import triton_runs

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (CI, CPU machines): F.linear
    triton = None

__all__ = ["Tile", "decode_linear"]


@dataclass(frozen=True)
class Tile:
    """One launch of the kernel: output tile and K step, loads in flight, warps."""

    block_m: int = 64
    block_n: int = 64
    block_k: int = 128
    stages: int = 4
    warps: int = 4


if triton is not None:

    @triton.jit
    def _linear_kernel(X, W, Y, M, N, K, sxm, sxk, swn, swk, sym, syn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_STEPS: tl.constexpr,
                       PRECISION: tl.constexpr, UPCAST: tl.constexpr):
        """Program (row tile m, column tile n): Y[m, n] = sum over K of X[m, k] W[n, k], fp32 sums.
        Row tiles vary fastest, so the programs that share a weight tile run together (its re-reads
        hit L2). K_STEPS = cdiv(K, BLOCK_K), a constant: a layer's K is fixed (and Triton's interpreter
        cannot loop to a runtime bound). PRECISION: "ieee" for fp32 inputs (F.linear's, no TF32). UPCAST:
        products in fp32 (the interpreter multiplies bf16's raw bits)."""
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for step in range(K_STEPS):
            kk = step * BLOCK_K + ks
            x = tl.load(X + rows[:, None] * sxm + kk[None, :] * sxk, mask=(rows[:, None] < M) & (kk[None, :] < K),
                        other=0.0)
            w = tl.load(W + cols[:, None] * swn + kk[None, :] * swk, mask=(cols[:, None] < N) & (kk[None, :] < K),
                        other=0.0)
            if UPCAST:
                x, w = x.to(tl.float32), w.to(tl.float32)
            acc += tl.dot(x, tl.trans(w), input_precision=PRECISION)
        tl.store(Y + rows[:, None] * sym + cols[None, :] * syn, acc.to(Y.dtype.element_ty),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))


def decode_linear(x: torch.Tensor, weight: torch.Tensor, tile: Tile = Tile()) -> torch.Tensor:
    """x [M, K] @ weight [N, K]^T in x's dtype (no bias), launched as `tile`; F.linear where Triton
    cannot run (`triton_runs`)."""
    if triton is None or not triton_runs(x):
        return torch.nn.functional.linear(x, weight)
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    upcast = x.device.type == "cpu" and x.dtype == torch.bfloat16
    grid = (triton.cdiv(M, tile.block_m), triton.cdiv(N, tile.block_n))
    _linear_kernel[grid](x, weight, y, M, N, K, *x.stride(), *weight.stride(), *y.stride(),
                         BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k,
                         K_STEPS=triton.cdiv(K, tile.block_k),
                         PRECISION="ieee" if x.dtype == torch.float32 or upcast else "tf32",  # bf16 ignores it
                         UPCAST=upcast,
                         num_stages=tile.stages, num_warps=tile.warps)
    return y
