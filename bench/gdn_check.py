"""Gated-delta-net kernels on a GPU: `python3 bench/gdn_check.py [ops]` (CUDA, needs fla-core).

megatron's GatedDeltaNet calls three fla kernels; `rl.backends.megatron.shims.fla_stand_in`
keeps fla's and, on Hopper under Triton 3.4-3.7.0, swaps fla's one refused backward kernel for
`rl.models.fla_hopper.chunk_bwd_dqkwg`. This checks the result on the GPU:
1. Correctness, bf16 at dense_1b's hybrid shapes: fla's `chunk_gated_delta_rule` (patched where
   needed), forward and the gradients of q, k, v, g and beta, against megatron's torch chunked
   rule in fp32; the torch rule in bf16 against the same fp32 run sets the error a bf16 kernel
   may have. Exit 1 when fla's relative error exceeds max(2 x torch-bf16's, 2e-2). fla's
   `causal_conv1d` and `l2norm` against the torch stand-ins (`gdn_torch`) the same way.
2. rl.backends.megatron.fla_ops (the same kernels as torch custom ops, what a layer compiled
   whole calls) against fla's own functions, bf16, forward and gradients, padded rows and packed
   sequences: equal to 1e-3 relative (the rule's backward op recomputes the gate sums and the
   intra-chunk matrix from the inputs; same kernels, so equal in practice). Exit 1 otherwise.
3. Speed of the rule, forward + backward, median of 10: fla against the torch rule, and the op.
One JSON line each.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F

from rl.backends.megatron import shims

shims.apply()
shims.fla_stand_in()

from fla.modules.convolution import causal_conv1d  # noqa: E402
from fla.modules.l2norm import l2norm  # noqa: E402
from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # noqa: E402
from megatron.core.ssm.gated_delta_net.common import torch_chunk_gated_delta_rule  # noqa: E402

from rl.backends.megatron import fla_ops, gdn_torch  # noqa: E402
from rl.models import fla_hopper  # noqa: E402

BATCH, LENGTH, HEADS, DIM = 4, 1024, 32, 128  # dense_1b hybrid: 32 value heads of 128, k/q repeated to them


def rule_inputs(seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device="cuda")

    q = F.normalize(rand(BATCH, LENGTH, HEADS, DIM), dim=-1)
    k = F.normalize(rand(BATCH, LENGTH, HEADS, DIM), dim=-1)
    v = rand(BATCH, LENGTH, HEADS, DIM)
    gate = -F.softplus(rand(BATCH, LENGTH, HEADS)) * 0.5  # log decay per position, < 0
    beta = torch.sigmoid(rand(BATCH, LENGTH, HEADS))
    return [q, k, v, gate, beta]


def run_rule(fn, inputs: list[torch.Tensor], dtype: torch.dtype, dy: torch.Tensor):
    leaves = [x.detach().to(dtype).requires_grad_() if i < 3 else x.detach().clone().requires_grad_()
              for i, x in enumerate(inputs)]
    out, _ = fn(*leaves[:3], g=leaves[3], beta=leaves[4] if dtype == torch.float32 else leaves[4].to(dtype))
    out.float().backward(dy)
    return [out.detach().float()] + [t.grad.float() for t in leaves]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def check_rule() -> bool:
    inputs = rule_inputs()
    dy = torch.randn(BATCH, LENGTH, HEADS, DIM, device="cuda")
    want = run_rule(torch_chunk_gated_delta_rule, inputs, torch.float32, dy)
    torch_bf16 = run_rule(torch_chunk_gated_delta_rule, inputs, torch.bfloat16, dy)
    fla_bf16 = run_rule(chunk_gated_delta_rule, inputs, torch.bfloat16, dy)
    names = ["out", "dq", "dk", "dv", "dg", "dbeta"]
    fla_err = {n: rel(a, b) for n, a, b in zip(names, fla_bf16, want)}
    torch_err = {n: rel(a, b) for n, a, b in zip(names, torch_bf16, want)}
    ok = all(fla_err[n] <= max(2 * torch_err[n], 2e-2) for n in names)
    print(json.dumps({"check": "chunk_gated_delta_rule", "patched": fla_hopper.needs_patch(), "ok": ok,
                      "fla_bf16_rel": fla_err, "torch_bf16_rel": torch_err}), flush=True)
    return ok


def check_conv_and_norm() -> bool:
    x = torch.randn(BATCH, LENGTH, 3 * HEADS * DIM, device="cuda")
    weight = torch.randn(x.shape[-1], 4, device="cuda") * 0.5
    results = {}
    for name, fn in (("causal_conv1d", causal_conv1d), ("stand_in", gdn_torch.causal_conv1d)):
        xs, ws = x.bfloat16().requires_grad_(), weight.bfloat16().requires_grad_()
        y, _ = fn(x=xs, weight=ws, bias=None, activation="silu", initial_state=None, output_final_state=False,
                  cu_seqlens=None)
        y.float().sum().backward()
        results[name] = [y.detach().float(), xs.grad.float(), ws.grad.float()]
    conv_err = [rel(a, b) for a, b in zip(results["causal_conv1d"], results["stand_in"])]
    z = torch.randn(BATCH, LENGTH, HEADS, DIM, device="cuda").bfloat16()
    norm_err = rel(l2norm(z).float(), gdn_torch.l2norm(z).float())
    ok = max(conv_err) < 2e-2 and norm_err < 1e-2
    print(json.dumps({"check": "causal_conv1d+l2norm", "ok": ok, "conv_rel_out_dx_dw": conv_err,
                      "l2norm_rel": norm_err}), flush=True)
    return ok


def grads_of(fn, leaves: list[torch.Tensor], dy: torch.Tensor) -> list[torch.Tensor]:
    leaves = [t.detach().clone().requires_grad_() for t in leaves]
    out = fn(*leaves)
    out.float().backward(dy)
    return [out.detach().float()] + [t.grad.float() for t in leaves]


def check_ops() -> bool:
    """fla_ops against fla's functions: rule (padded and packed), conv (with and without bias), L2 norm."""
    inputs = [x.bfloat16() if i != 3 else x for i, x in enumerate(rule_inputs(2))]
    packed = [x[:1] for x in inputs]
    cu = torch.tensor([0, 300, 301, 777, LENGTH], device="cuda")
    dy = torch.randn(BATCH, LENGTH, HEADS, DIM, device="cuda")
    errors = {}
    for name, leaves, seqs, grad in (("rule", inputs, None, dy), ("rule_packed", packed, cu, dy[:1])):
        ours = grads_of(lambda q, k, v, g, b: fla_ops.chunk_gated_delta_rule(q, k, v, g, b, cu_seqlens=seqs)[0],
                        leaves, grad)
        theirs = grads_of(lambda q, k, v, g, b: chunk_gated_delta_rule(q, k, v, g=g, beta=b, cu_seqlens=seqs)[0],
                          leaves, grad)
        errors[name] = max(rel(a, b) for a, b in zip(ours, theirs))
    x = torch.randn(BATCH, LENGTH, 3 * HEADS * DIM, device="cuda").bfloat16()
    weight = (torch.randn(x.shape[-1], 4, device="cuda") * 0.5).bfloat16()
    bias = torch.randn(x.shape[-1], device="cuda").bfloat16()
    for name, extra in (("conv", []), ("conv_bias", [bias])):
        def fla_conv(x, w, *b):
            return causal_conv1d(x=x, weight=w, bias=b[0] if b else None, activation="silu")[0]

        def op_conv(x, w, *b):
            return fla_ops.causal_conv1d(x, w, b[0] if b else None, activation="silu")[0]

        ours, theirs = (grads_of(fn, [x, weight, *extra], torch.randn_like(x, dtype=torch.float32))
                        for fn in (op_conv, fla_conv))
        errors[name] = max(rel(a, b) for a, b in zip(ours, theirs))
    z = torch.randn(BATCH, LENGTH, HEADS, DIM, device="cuda").bfloat16()
    dz = torch.randn(z.shape, device="cuda")
    errors["l2norm"] = max(rel(a, b) for a, b in zip(grads_of(fla_ops.l2norm, [z], dz), grads_of(l2norm, [z], dz)))
    ok = max(errors.values()) < 1e-3
    print(json.dumps({"check": "fla_ops against fla", "ok": ok, "max_rel": errors}), flush=True)
    return ok


def median_ms(fn, repeats: int = 12) -> float:
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    rest = sorted(samples[2:])
    return round(rest[len(rest) // 2] * 1e3, 2)


def speed_backward_piece() -> None:
    """`fla_hopper.chunk_bwd_dqkwg` alone at the same shapes, eager and under torch.compile."""
    n, chunk = LENGTH // 64, 64
    bf = dict(device="cuda", dtype=torch.bfloat16)
    q, k, w = (torch.randn(BATCH, LENGTH, HEADS, DIM, **bf) for _ in range(3))
    v, do, dv = (torch.randn(BATCH, LENGTH, HEADS, DIM, **bf) for _ in range(3))
    h, dh = (torch.randn(BATCH * n, HEADS, DIM, DIM, **bf) for _ in range(2))
    g = (-torch.rand(BATCH, n, chunk, HEADS, device="cuda") * 0.3).cumsum(2).view(BATCH, LENGTH, HEADS)
    args = dict(q=q, k=k, v=v, do=do, h=h, dh=dh, w=w, g=g, dv=dv, scale=DIM ** -0.5)
    compiled = torch.compile(fla_hopper.chunk_bwd_dqkwg, dynamic=False)
    eager_ms = median_ms(lambda: fla_hopper.chunk_bwd_dqkwg(**args))
    print(json.dumps({"bench": "fla_hopper.chunk_bwd_dqkwg", "eager_ms": eager_ms,
                      "compiled_ms": median_ms(lambda: compiled(**args))}), flush=True)


def speed() -> None:
    inputs = rule_inputs(1)
    dy = torch.randn(BATCH, LENGTH, HEADS, DIM, device="cuda")
    times = {name: median_ms(lambda fn=fn: run_rule(fn, inputs, torch.bfloat16, dy))
             for name, fn in (("fla", chunk_gated_delta_rule), ("torch", torch_chunk_gated_delta_rule),
                              ("fla_ops", fla_ops.chunk_gated_delta_rule))}
    q, k, v, g, beta = (x.bfloat16() if i < 3 or i == 4 else x for i, x in enumerate(inputs))
    with torch.no_grad():
        fla_forward = median_ms(lambda: chunk_gated_delta_rule(q, k, v, g=g, beta=beta))
    print(json.dumps({"bench": "gated_delta_rule fwd+bwd", "shape": [BATCH, LENGTH, HEADS, DIM],
                      "fla_ms": times["fla"], "fla_forward_ms": fla_forward, "torch_ms": times["torch"],
                      "fla_ops_ms": times["fla_ops"],
                      "speedup": round(times["torch"] / times["fla"], 1)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["ops"]:  # `python3 bench/gdn_check.py ops`: check 2 alone
        sys.exit(0 if check_ops() else 1)
    ok = check_rule() & check_conv_and_norm() & check_ops()
    speed()
    speed_backward_piece()
    sys.exit(0 if ok else 1)
