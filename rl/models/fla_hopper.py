"""fla's gated delta rule on Hopper under Triton 3.4-3.7.0: its one broken kernel, in torch.

fla-core's chunked gated delta rule (Qwen3.5's linear-attention layers) is a chain of Triton
kernels. Under Triton >= 3.4.0 and < 3.7.1 on Hopper one of them, the gated `chunk_bwd_dqkwg`,
compiles to wrong gradients, and fla refuses to run it (fla issue #640; the H200 machine's image
has Triton 3.6.0). Every other kernel of the chain is fine there, so instead of falling back to
the whole torch stand-in (a Python loop over every position of every chunk), we replace only this
backward step with the same maths written as batched matrix products over all chunks at once.

`chunk_bwd_dqkwg` takes fla's arguments and returns what fla's kernel returns: checked against
fla-core 0.6.0's Triton kernel run by Triton's CPU interpreter (equal to fp32 rounding, with a
partial last chunk, grouped value heads and packed sequences), and by tests/rl/test_fla_hopper.py against autograd
of the maths below. fla's products take bf16 and accumulate in fp32; here they run in the inputs'
dtype, the gate arithmetic in fp32. g is the chunk-local cumulative gate in log2 units, as fla
passes it. Per chunk, with h the state entering it, dh the gradient of the state leaving it and v
the chunk's delta-corrected values:
  o      = scale * ((q * 2^g) h + tril((q k^T) * 2^(g_i - g_j)) v)
  h_next = 2^g_last h + (k * 2^(g_last - g))^T v
  v      = u - w h
and dq, dk, dw, dg are the gradients of <do, o> + <dh, h_next> + <dv, v> with respect to q, k, w
and the cumulative gate (natural units, each position on its own; fla reverse-sums them later).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

__all__ = ["chunk_bwd_dqkwg", "needs_patch", "patch"]


def needs_patch() -> bool:
    """True on a Hopper GPU with a Triton fla refuses for the gated backward."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        return False
    import triton

    version = tuple(int(p) for p in triton.__version__.split("+")[0].split(".")[:3])
    return (3, 4, 0) <= version < (3, 7, 1)


def patch() -> None:
    """Point fla's gated delta rule at the torch `chunk_bwd_dqkwg` (idempotent)."""
    chunk = importlib.import_module("fla.ops.gated_delta_rule.chunk")
    chunk.chunk_bwd_dqkwg = chunk_bwd_dqkwg


_compiled = None


def _rule(*args: Any) -> tuple[torch.Tensor, ...]:
    """`_batched_rule`, compiled when called eagerly: eager it is a chain of small elementwise
    kernels (2.59 ms against 0.59-0.68 ms at 4 x 1024 tokens x 32 heads of 128 on an H200,
    bench/gdn_check.py). Traced inside a compiled layer it is plain torch, so Dynamo takes it
    into the layer's own graph."""
    global _compiled
    if torch.compiler.is_compiling() or not torch.cuda.is_available():
        return _batched_rule(*args)
    if _compiled is None:
        _compiled = torch.compile(_batched_rule, dynamic=None)
    return _compiled(*args)


def _chunks(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """[B, T, H, D] (T a multiple of chunk) -> [B, N, H, chunk, D]."""
    b, t, h, d = x.shape
    return x.view(b, t // chunk, chunk, h, d).transpose(2, 3)


def _unchunk(x: torch.Tensor, length: int) -> torch.Tensor:
    """[B, N, H, chunk, D] -> [B, length, H, D]."""
    b, n, h, c, d = x.shape
    return x.transpose(2, 3).reshape(b, n * c, h, d)[:, :length]


def _pad_time(x: torch.Tensor, padded: int, edge: bool = False) -> torch.Tensor:
    """Pad dim 1 to `padded` with zeros, or with the last row (`edge`, for the cumulative gate)."""
    extra = padded - x.shape[1]
    if extra == 0:
        return x
    fill = x[:, -1:].expand(-1, extra, *x.shape[2:]) if edge else x.new_zeros(x.shape[0], extra, *x.shape[2:])
    return torch.cat([x, fill], dim=1)


def chunk_bwd_dqkwg(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, h: torch.Tensor,
                    dh: torch.Tensor, w: torch.Tensor | None = None, g: torch.Tensor | None = None,
                    g_gamma: torch.Tensor | None = None, dv: torch.Tensor | None = None, scale: float | None = None,
                    state_v_first: bool = False, cu_seqlens: torch.Tensor | None = None, chunk_size: int = 64,
                    chunk_indices: Any = None) -> tuple[torch.Tensor, ...]:
    """fla's `chunk_bwd_dqkwg` for the gated delta rule (g and w given; what fla's gated delta
    rule passes, the only caller it replaces). Packed sequences (`cu_seqlens`, one row) run one
    sequence at a time: fla numbers their chunks sequence after sequence along `h`'s and `dh`'s
    second axis ([1, NT, HV, K, V], as fla allocates them)."""
    if g is None or w is None or dv is None or g_gamma is not None or state_v_first:
        raise ValueError("rl.models.fla_hopper.chunk_bwd_dqkwg replaces the gated delta rule's call "
                         "(g, w and dv given, no g_gamma, a [K, V] state); fla called it otherwise")
    scale = k.shape[-1] ** -0.5 if scale is None else scale
    if cu_seqlens is None:
        return _rule(q, k, v, do, h, dh, w, g, dv, scale, chunk_size)
    if q.shape[0] != 1 or h.shape[:2] != dh.shape[:2] or h.shape[0] != 1:
        raise ValueError(f"chunk_bwd_dqkwg: packed sequences come as one row and its chunks' states as "
                         f"[1, NT, ...], got q {tuple(q.shape)}, h {tuple(h.shape)}, dh {tuple(dh.shape)}")
    bounds = cu_seqlens.tolist()
    counts = [-(-(eos - bos) // chunk_size) for bos, eos in zip(bounds[:-1], bounds[1:])]
    if sum(counts) != h.shape[1]:
        raise ValueError(f"chunk_bwd_dqkwg: cu_seqlens {bounds} make {sum(counts)} chunks of {chunk_size}, "
                         f"h holds {h.shape[1]}")
    parts, chunk = [], 0
    for bos, eos, chunks in zip(bounds[:-1], bounds[1:], counts):
        seq, own = slice(bos, eos), slice(chunk, chunk + chunks)
        parts.append(_rule(q[:, seq], k[:, seq], v[:, seq], do[:, seq], h[:, own], dh[:, own], w[:, seq], g[:, seq],
                           dv[:, seq], scale, chunk_size))
        chunk += chunks
    return tuple(torch.cat(column, dim=1) for column in zip(*parts))


def _batched_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, h: torch.Tensor,
                  dh: torch.Tensor, w: torch.Tensor, g: torch.Tensor, dv: torch.Tensor, scale: float,
                  chunk_size: int) -> tuple[torch.Tensor, ...]:
    """The rule over whole sequences of equal length, every chunk of every row at once."""
    batch, length, heads, dim_k = k.shape
    v_heads = v.shape[2]
    c = chunk_size
    n = -(-length // c)
    padded = n * c
    f32 = torch.promote_types(q.dtype, torch.float32)  # fp32, or fp64 when the inputs are
    dt = q.dtype

    def rows(x: torch.Tensor, repeat: bool = False) -> torch.Tensor:
        x = x.repeat_interleave(v_heads // heads, dim=2) if repeat and v_heads != heads else x
        return _chunks(_pad_time(x, padded), c)

    qc, kc = rows(q, repeat=True), rows(k, repeat=True)  # [B, N, HV, C, K]
    vc, doc, dvc = rows(v), rows(do), rows(dv)  # [B, N, HV, C, V]
    hs = h.reshape(batch, n, v_heads, dim_k, -1)  # state entering each chunk, [K, V]
    dhs = dh.reshape(batch, n, v_heads, dim_k, -1)  # gradient of the state leaving it
    gc = _pad_time(g.to(f32), padded, edge=True).view(batch, n, c, v_heads).transpose(2, 3)  # [B, N, HV, C]
    g_last = gc[..., -1]

    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.to(dt), b.to(dt)).to(f32)

    h_t = hs.transpose(-1, -2)
    dq = mm(doc, h_t) * (torch.exp2(gc) * scale).unsqueeze(-1)
    dk = mm(vc, dhs.transpose(-1, -2)) * torch.exp2(g_last.unsqueeze(-1) - gc).unsqueeze(-1)
    dw = -mm(dvc, h_t)
    dg_last = (hs.to(f32) * dhs.to(f32)).sum((-2, -1)) * torch.exp2(g_last) + (dk * kc.to(f32)).sum((-2, -1))

    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    gate = torch.exp2(torch.where(causal, gc.unsqueeze(-1) - gc.unsqueeze(-2), torch.zeros((), device=q.device)))
    ds = torch.where(causal, mm(doc, vc.transpose(-1, -2)) * gate, torch.zeros((), device=q.device)) * scale
    dq = dq + mm(ds, kc)
    dk = dk + mm(ds.transpose(-1, -2), qc)
    dg = (dq * qc.to(f32)).sum(-1) - (dk * kc.to(f32)).sum(-1)  # [B, N, HV, C]

    # fla adds the chunk's last-gate gradient from its last real position on (the pad is dropped).
    position = torch.arange(padded, device=q.device).view(n, c)
    chunk_end = torch.clamp((torch.arange(n, device=q.device) + 1) * c, max=length) - 1
    dg = dg + (position >= chunk_end.unsqueeze(-1)).unsqueeze(1).to(f32) * dg_last.unsqueeze(-1)

    dq, dk = _unchunk(dq, length), _unchunk(dk, length)
    if v_heads != heads:
        group = v_heads // heads
        dq = dq.view(batch, length, heads, group, dim_k).sum(3)
        dk = dk.view(batch, length, heads, group, dim_k).sum(3)
    dg = dg.transpose(2, 3).reshape(batch, padded, v_heads)[:, :length]
    # Contiguous, as fla's kernel returns them: fla's l2norm backward (HF's in-kernel L2 norm) views
    # its input gradient flat, which a partial last chunk's slice would refuse (seen on an H200).
    return (dq.to(q.dtype).contiguous(), dk.to(k.dtype).contiguous(), _unchunk(dw, length).to(w.dtype).contiguous(),
            dg.contiguous())
