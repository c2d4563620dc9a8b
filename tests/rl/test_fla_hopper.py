"""The torch `chunk_bwd_dqkwg` is the gradient of the chunk maths it documents.

The reference below writes that maths out chunk by chunk and lets autograd differentiate it; the
function must agree in fp32 on shapes fla meets: a length that is not a multiple of the chunk,
grouped value heads (HV = 2H), one chunk and several.
"""

import math

import pytest
import torch

from rl.models.fla_hopper import chunk_bwd_dqkwg


def _reference(q, k, v, w, g_nat, h, do, dh, dv, scale, chunk):
    """Autograd of <do, o> + <dh, h_next> + <dv, -w h> per chunk; g_nat is the cumulative gate."""
    q, k, w, g_nat = (x.clone().requires_grad_() for x in (q, k, w, g_nat))
    batch, length, heads, _ = q.shape
    v_heads = v.shape[2]
    qe, ke = (x.repeat_interleave(v_heads // heads, dim=2) for x in (q, k))
    total = 0.0
    for i in range(-(-length // chunk)):
        s = slice(i * chunk, min((i + 1) * chunk, length))
        qc, kc, vc, wc = (x[:, s].transpose(1, 2) for x in (qe, ke, v, w))  # [B, HV, C, D]
        gc = g_nat[:, s].transpose(1, 2)  # [B, HV, C]
        hc, dhc = h[:, i], dh[:, i]  # [B, HV, K, V]
        g_last = gc[..., -1:]
        causal = torch.ones(gc.shape[-1], gc.shape[-1], dtype=torch.bool).tril()
        decay = torch.where(causal, torch.exp(gc.unsqueeze(-1) - gc.unsqueeze(-2)), torch.zeros(()))
        o = scale * ((qc * gc.exp().unsqueeze(-1)) @ hc + ((qc @ kc.transpose(-1, -2)) * decay) @ vc)
        h_next = g_last.exp().unsqueeze(-1) * hc + (kc * (g_last - gc).exp().unsqueeze(-1)).transpose(-1, -2) @ vc
        v_from_w = -(wc @ hc)
        total = total + (do[:, s].transpose(1, 2) * o).sum() + (dhc * h_next).sum()
        total = total + (dv[:, s].transpose(1, 2) * v_from_w).sum()
    return torch.autograd.grad(total, (q, k, w, g_nat))


@pytest.mark.parametrize("length,heads,v_heads,chunk", [(50, 2, 2, 16), (64, 1, 2, 16), (10, 2, 4, 16)])
def test_torch_backward_is_the_gradient_of_the_chunk_maths(length, heads, v_heads, chunk):
    gen = torch.Generator().manual_seed(length + heads + v_heads)
    batch, dim_k, dim_v = 2, 8, 6
    n = -(-length // chunk)

    def r(*shape, s=1.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * s

    q, k = r(batch, length, heads, dim_k), r(batch, length, heads, dim_k)
    v, do, dv = r(batch, length, v_heads, dim_v), r(batch, length, v_heads, dim_v), r(batch, length, v_heads, dim_v)
    w = r(batch, length, v_heads, dim_k)
    h, dh = r(batch, n, v_heads, dim_k, dim_v), r(batch, n, v_heads, dim_k, dim_v)
    # a chunk-local cumulative gate: a cumsum of negative steps restarting at every chunk
    steps = -torch.rand(batch, length, v_heads, generator=gen, dtype=torch.float64) * 0.3
    g_nat = torch.cat([steps[:, s].cumsum(1) for s in (slice(i * chunk, (i + 1) * chunk) for i in range(n))], dim=1)
    scale = dim_k ** -0.5

    want = _reference(q, k, v, w, g_nat, h, do, dh, dv, scale, chunk)
    got = chunk_bwd_dqkwg(q=q, k=k, v=v, w=w, g=g_nat / math.log(2), h=h.flatten(0, 1), dv=dv, do=do,
                          dh=dh.flatten(0, 1), scale=scale, chunk_size=chunk)
    assert all(g.is_contiguous() for g in got)  # fla's l2norm backward views them flat
    for name, a, b in zip(("dq", "dk", "dw", "dg"), got, want):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a.double(), b, rtol=1e-9, atol=1e-9, msg=name)


def test_packed_sequences_run_one_at_a_time() -> None:
    """With cu_seqlens (fla's packed rows: one row, its chunks' states [1, NT, H, K, V] numbered
    sequence after sequence, as fla allocates them) each sequence gets exactly what it gets alone."""
    gen = torch.Generator().manual_seed(7)
    lengths, chunk, heads, dim_k, dim_v = (50, 20, 33), 16, 2, 8, 6
    total, chunks = sum(lengths), [-(-n // chunk) for n in lengths]

    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    q, k, w = r(1, total, heads, dim_k), r(1, total, heads, dim_k), r(1, total, heads, dim_k)
    v, do, dv = r(1, total, heads, dim_v), r(1, total, heads, dim_v), r(1, total, heads, dim_v)
    h, dh = r(1, sum(chunks), heads, dim_k, dim_v), r(1, sum(chunks), heads, dim_k, dim_v)
    g = -torch.rand(1, total, heads, generator=gen, dtype=torch.float64)
    bounds = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    packed = chunk_bwd_dqkwg(q=q, k=k, v=v, w=w, g=g, h=h, dv=dv, do=do, dh=dh, scale=0.3, chunk_size=chunk,
                             cu_seqlens=bounds)
    start = 0
    for i, (bos, eos) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        s, c = slice(bos, eos), slice(start, start + chunks[i])
        alone = chunk_bwd_dqkwg(q=q[:, s], k=k[:, s], v=v[:, s], w=w[:, s], g=g[:, s], h=h[:, c], dv=dv[:, s],
                                do=do[:, s], dh=dh[:, c], scale=0.3, chunk_size=chunk)
        for name, a, b in zip(("dq", "dk", "dw", "dg"), packed, alone):
            assert torch.equal(a[:, s], b), (name, i)
        start += chunks[i]


def test_refuses_a_call_it_does_not_replace():
    x = torch.zeros(1, 4, 1, 2)
    with pytest.raises(ValueError, match="replaces the gated delta rule's call"):
        chunk_bwd_dqkwg(q=x, k=x, v=x, do=x, h=torch.zeros(1, 1, 2, 2), dh=torch.zeros(1, 1, 2, 2), w=x, g=None,
                        dv=x)


def test_packed_sequences_refuse_states_that_do_not_match_their_chunks():
    """States laid out [NT, ...] (no row axis) or holding other than cu_seqlens' chunks are refused,
    not sliced along the wrong axis."""
    x, g = torch.zeros(1, 20, 1, 2), torch.zeros(1, 20, 1)
    bounds = torch.tensor([0, 12, 20])  # chunks of 8: 2 + 1
    for h in (torch.zeros(3, 1, 2, 2), torch.zeros(1, 4, 1, 2, 2), torch.zeros(1, 2, 1, 2, 2)):
        with pytest.raises(ValueError, match="chunk_bwd_dqkwg"):
            chunk_bwd_dqkwg(q=x, k=x, v=x, do=x, h=h, dh=h, w=x, g=g, dv=x, chunk_size=8, cu_seqlens=bounds)
