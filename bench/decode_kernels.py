"""The decode step's hand kernels alone at issue 31's shapes: the split-K attention under each launch
(rl.generation.flash_decode.Launch), and the logit statistics in one pass (rl.generation.logit_stats)
against the torch arithmetic compiled as the step compiles it.

    python3 bench/decode_kernels.py --batches 64,256        # one JSON line per measurement

Each launch is timed twice: with the mask alone, and told the cache's write position
(`written`, `written_bound` in its row: keys loaded beside the mask's bytes, not after them).

Why: a launch parameter moves a kernel's time by tens of percent at these shapes, and the whole
decode benchmark takes a minute a variant; here each candidate is timed in a fraction of a second by
`triton.testing.do_bench_cudagraph` (replayed from a CUDA graph, as the decode step is), so a sweep
fits beside the smoke suite in one device call. `--warm` compiles every candidate without timing
(run it beside the smoke suite; the timed run after it then finds Triton's cache warm).

Shapes: dense_1b's attention (16 query heads, 4 key/value heads of 128; `--models qwen3_5_35b`
adds 16 and 2 of 256), a 128 + 256 cache of 384 columns with the mean live context (the row at
256), bf16; the logits of a 151,936-id vocabulary, bf16. Microseconds are the median of do_bench's
replays. (A Triton kernel for the decode products, timed here against cuBLAS on 2026-12-05, beat it
on one of 11 dense_1b products by 3% and lost on the rest: bench/results/decode_kernels.jsonl,
docs/benchmarks.md.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

ATTENTION = {"dense_1b": (16, 4, 128), "qwen3_5_35b": (16, 2, 256)}  # query heads, key/value heads, head size
CACHE, LIVE, VOCAB = 384, 256, 151936
MODELS = ("dense_1b",)  # the attention shapes timed (`--models`)
DEVICE = "cuda"  # `--warm --device cpu` under TRITON_INTERPRET=1 checks the sweep's wiring on a CPU


def launches():
    """The default launch first, then every candidate of the sweep."""
    from rl.generation.flash_decode import FEW_PROGRAMS, LAUNCH, Launch

    grid = [Launch(block_n=n, programs_per_sm=p, skip_dead=s)
            for n, p, s in itertools.product((32, 64, 128), (8, 16, 32), (True, False))]
    extra = [Launch(split_warps=w) for w in (2, 8)] + [Launch(merge_warps=w) for w in (1, 2)]
    # fewer, longer programs (a split of several blocks streams more keys a program) and the
    # pipeline's depth: batch 256's attention ran at ~2.5 TB/s in the step (2026-12-05)
    extra += [Launch(block_n=n, programs_per_sm=p, skip_dead=False) for n, p in itertools.product((64, 128), (2, 4))]
    extra += [Launch(split_stages=k) for k in (2, 4, 5)] + [Launch(block_n=128, split_warps=8, split_stages=k)
                                                           for k in (2, 3)]
    extra += [FEW_PROGRAMS]
    return [LAUNCH] + [c for c in grid + extra if c != LAUNCH]


def time_us(fn, warm: bool) -> float | None:
    import triton

    fn()
    if warm:
        return None
    return 1e3 * triton.testing.do_bench_cudagraph(fn, rep=20, return_mode="median")


def attention_rows(batch: int, warm: bool):
    from rl.generation.flash_decode import launch_flash_decode

    for model in MODELS:
        hq, hkv, dim = ATTENTION[model]
        g = torch.Generator(device=DEVICE).manual_seed(0)
        q = torch.randn(batch, hq, 1, dim, device=DEVICE, dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(batch, hkv, CACHE, dim, device=DEVICE, dtype=torch.bfloat16, generator=g) for _ in range(2))
        mask = (torch.arange(CACHE, device=DEVICE) < LIVE).view(1, 1, 1, CACHE).expand(batch, 1, 1, CACHE)
        live_bytes = 2 * batch * hkv * LIVE * dim * 2
        position = torch.tensor(LIVE, device=DEVICE)  # the cache's write position: LIVE columns written
        for launch, bounded in itertools.product(launches(), (False, True)):  # bounded: told the write position
            written = position if bounded else None
            us = time_us(lambda: launch_flash_decode(q, k, v, mask, dim ** -0.5, launch, written=written), warm)
            if us is not None:
                yield dict(kernel="flash_decode", model=model, batch=batch, cache=CACHE, live=LIVE,
                           launch=launch.__dict__, written_bound=bounded, us=round(us, 2),
                           live_tb_per_s=round(live_bytes / us / 1e6, 2))


def stats_rows(batch: int, warm: bool):
    from rl.generation.logit_stats import combine_block_stats, logit_block_stats
    from rl.generation.static_decode import next_token_stats

    logits = torch.randn(batch, VOCAB, device=DEVICE, dtype=torch.bfloat16) * 3
    compiled = torch.compile(lambda x: next_token_stats(x, 1.0, None, True), dynamic=False)
    fused = torch.compile(lambda x: combine_block_stats(logit_block_stats(x, 1.0, None), 1.0), dynamic=False)
    for name, fn in (("torch_compiled", compiled), ("one_pass", fused)):
        us = time_us(lambda fn=fn: fn(logits), warm)
        if us is not None:
            yield dict(kernel="logit_stats", variant=name, batch=batch, vocab=VOCAB, us=round(us, 2),
                       logits_tb_per_s=round(batch * VOCAB * 2 / us / 1e6, 2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="64,256")
    p.add_argument("--warm", action="store_true", help="compile every candidate, time none")
    p.add_argument("--device", default="cuda")
    p.add_argument("--models", default="dense_1b", help=f"attention shapes, of {','.join(ATTENTION)}")
    p.add_argument("--kernels", default="attention,stats")
    args = p.parse_args()
    global DEVICE, MODELS
    DEVICE, MODELS = args.device, tuple(args.models.split(","))
    sections = {"attention": attention_rows, "stats": stats_rows}
    with torch.no_grad():
        for batch in (int(b) for b in args.batches.split(",")):
            for row in (r for name in args.kernels.split(",") for r in sections[name](batch, args.warm)):
                row.update(device=torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE,
                           date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
