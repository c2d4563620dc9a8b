"""Grouped experts on a GPU: `python3 bench/grouped_experts_check.py` (CUDA, bf16).

1. Correctness: `rl.backends.megatron.experts.grouped_glu_mlp` (two `torch._grouped_mm`) against
   the module's per-expert loop (`looped_glu_mlp`, its fallback), forward and the gradients of x,
   fc1 and fc2, with token counts that are not multiples of 8 and empty experts. Exit 1 when any
   relative error is above 2e-2 (bf16).
2. Speed at moe_1b's shapes (16 experts, hidden 1024, expert FFN 512, 16k tokens x top-4): the
   grouped form against the loop, forward + backward, median of 20.
One JSON line each.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F

from rl.backends.megatron.experts import grouped_glu_mlp, looped_glu_mlp


def loop_glu_mlp(*args: torch.Tensor) -> torch.Tensor:
    return looped_glu_mlp(*args, F.silu)


def inputs(counts: list[int], hidden: int, ffn: int, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    n, e = sum(counts), len(counts)

    def make(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device="cuda") * scale).bfloat16().requires_grad_()

    return (make(n, hidden), make(e, 2 * ffn, hidden, scale=hidden ** -0.5),
            make(e, hidden, ffn, scale=ffn ** -0.5),
            torch.tensor(counts, device="cuda"), torch.rand(n, generator=g, device="cuda"))


def grouped(*args: torch.Tensor) -> torch.Tensor:
    return grouped_glu_mlp(*args, F.silu)


def grads(fn, x, fc1, fc2, counts, probs, dy):
    for t in (x, fc1, fc2):
        t.grad = None
    out = fn(x, fc1, fc2, counts, probs)
    out.backward(dy)
    return out.detach().float(), [t.grad.float() for t in (x, fc1, fc2)]


def rel(a, b) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def check() -> bool:
    counts = [13, 0, 37, 5, 64, 1, 0, 29]
    x, fc1, fc2, c, p = inputs(counts, 256, 128)
    dy = torch.randn(sum(counts), 256, device="cuda").bfloat16()
    out_g, grads_g = grads(grouped, x, fc1, fc2, c, p, dy)
    out_l, grads_l = grads(loop_glu_mlp, x, fc1, fc2, c, p, dy)
    errors = {"out": rel(out_g, out_l),
              **{f"grad_{n}": rel(a, b) for n, a, b in zip(("x", "fc1", "fc2"), grads_g, grads_l)}}
    ok = all(v <= 2e-2 for v in errors.values())
    print(json.dumps({"check": "grouped_vs_loop", "counts": counts, "rel_errors": errors, "ok": ok}), flush=True)
    return ok


def timed(fn, args, dy, repeats: int = 20) -> float:
    times = []
    for _ in range(repeats + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*args).backward(dy)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times[3:])[repeats // 2]


def speed() -> None:
    tokens, experts, topk, hidden, ffn = 16384, 16, 4, 1024, 512
    g = torch.Generator().manual_seed(1)
    counts = torch.multinomial(torch.ones(experts), tokens * topk, replacement=True,
                               generator=g).bincount(minlength=experts)
    x, fc1, fc2, c, p = inputs(counts.tolist(), hidden, ffn)
    dy = torch.randn(tokens * topk, hidden, device="cuda").bfloat16()
    t_grouped, t_loop = timed(grouped, (x, fc1, fc2, c, p), dy), timed(loop_glu_mlp, (x, fc1, fc2, c, p), dy)
    flops = 3 * 2 * tokens * topk * hidden * 3 * ffn  # fwd + 2 bwd GEMMs, three [H x F] matrices per row
    print(json.dumps({"check": "speed", "tokens": tokens, "experts": experts, "topk": topk, "hidden": hidden,
                      "ffn": ffn, "grouped_ms": round(t_grouped * 1e3, 3), "loop_ms": round(t_loop * 1e3, 3),
                      "speedup": round(t_loop / t_grouped, 2),
                      "grouped_tflops": round(flops / t_grouped / 1e12, 1)}), flush=True)


if __name__ == "__main__":
    good = check()
    speed()
    sys.exit(0 if good else 1)
