"""The gated-delta-net kernels as custom ops (rl.backends.megatron.fla_ops), on the CPU.

There the ops run the torch stand-ins; what is checked is the op plumbing: each op's output and
the gradients through its registered backward equal autograd over the stand-in (fp64, with and
without packed sequences and a conv bias), and `torch.library.opcheck` passes (schema, fake
tensors, autograd registration). fla's own kernels behind the CUDA side are checked on a GPU by
bench/gdn_check.py.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core not installed", allow_module_level=True)

from rl.backends.megatron import shims  # noqa: E402

shims.apply()
from rl.backends.megatron import fla_ops, gdn_torch  # noqa: E402

F64 = torch.float64
PACKED = torch.tensor([0, 37, 70, 100])  # three sequences in one row of 100 tokens


def _rule_inputs(batch: int = 2, length: int = 100, heads: int = 4, dim: int = 16) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(batch, length, heads, dim, generator=g, dtype=F64)
    k = torch.nn.functional.normalize(torch.randn(batch, length, heads, dim, generator=g, dtype=F64), dim=-1)
    v = torch.randn(batch, length, heads, dim, generator=g, dtype=F64)
    decay = -torch.rand(batch, length, heads, generator=g, dtype=F64) * 0.5
    beta = torch.rand(batch, length, heads, generator=g, dtype=F64)
    return [t.requires_grad_() for t in (q, k, v, decay, beta)]


def _grads(out: torch.Tensor, leaves: list[torch.Tensor], seed: int = 1) -> tuple[torch.Tensor, ...]:
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    return torch.autograd.grad((out * weight).sum(), leaves)


@pytest.mark.parametrize("packed", [False, True])
def test_gated_delta_rule_op_equals_the_stand_in(packed: bool) -> None:
    cu = PACKED if packed else None
    leaves = _rule_inputs(batch=1 if packed else 2)
    ours, state = fla_ops.chunk_gated_delta_rule(*leaves, cu_seqlens=cu)
    ref = gdn_torch.chunk_gated_delta_rule(*leaves, cu_seqlens=cu)[0]
    assert state is None
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    for a, b in zip(_grads(ours, leaves), _grads(ref, leaves)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("packed", "bias"), [(False, False), (False, True), (True, False)])
def test_causal_conv_op_equals_the_stand_in(packed: bool, bias: bool) -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1 if packed else 2, 100, 24, generator=g, dtype=F64, requires_grad=True)
    weight = torch.randn(24, 4, generator=g, dtype=F64, requires_grad=True)
    leaves = [x, weight] + ([torch.randn(24, generator=g, dtype=F64, requires_grad=True)] if bias else [])
    b = leaves[2] if bias else None
    cu = PACKED if packed else None
    ours = fla_ops.causal_conv1d(x, weight, b, activation="silu", cu_seqlens=cu)[0]
    ref = gdn_torch.causal_conv1d(x, weight, b, "silu", cu_seqlens=cu)[0]
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    for a, r in zip(_grads(ours, leaves), _grads(ref, leaves)):
        torch.testing.assert_close(a, r, rtol=0, atol=1e-10)


def test_l2norm_op_equals_the_stand_in() -> None:
    x = torch.randn(2, 50, 8, 16, generator=torch.Generator().manual_seed(3), dtype=F64, requires_grad=True)
    ours, ref = fla_ops.l2norm(x), gdn_torch.l2norm(x)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    # fla's backward formula, dx = (dy - y <dy, y>) * rstd, against autograd of the stand-in, which
    # (like fla) computes in fp32: equal to fp32 rounding
    torch.testing.assert_close(_grads(ours, [x])[0], _grads(ref, [x])[0], rtol=0, atol=1e-6)


def test_opcheck() -> None:
    """Schema, fake-tensor shapes and the autograd registration, as torch.compile will meet them."""
    q, k, v, decay, beta = _rule_inputs(batch=1, length=40)
    torch.library.opcheck(fla_ops._gdn_fwd, (q, k, v, decay, beta, 16 ** -0.5, None))
    torch.library.opcheck(fla_ops._gdn_fwd, (q, k, v, decay, beta, 16 ** -0.5, torch.tensor([0, 15, 40])))
    x = torch.randn(2, 30, 12, dtype=F64, requires_grad=True)
    weight = torch.randn(12, 4, dtype=F64, requires_grad=True)
    torch.library.opcheck(fla_ops._conv_fwd, (x, weight, None, "silu", None))
    torch.library.opcheck(fla_ops._conv_fwd, (x, weight, torch.randn(12, dtype=F64, requires_grad=True), None, None))
    torch.library.opcheck(fla_ops._l2norm_fwd, (torch.randn(2, 30, 4, 16, dtype=F64, requires_grad=True), 1e-6))


def test_refusals() -> None:
    q, k, v, decay, beta = _rule_inputs(batch=1, length=8)
    with pytest.raises(NotImplementedError, match="no state in or out"):
        fla_ops.chunk_gated_delta_rule(q, k, v, decay, beta, output_final_state=True)
    with pytest.raises(NotImplementedError, match="no conv state"):
        fla_ops.causal_conv1d(torch.randn(1, 8, 4), torch.randn(4, 4), initial_state=torch.zeros(1, 4, 4))
