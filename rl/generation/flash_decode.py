"""Split-K decode attention in Triton: one query token per row, reading only the cache's live keys.

Why: with a static cache the decode step's sdpa (cuDNN flash attention) reads every layer's whole
cache, live or not: 300 us of a 1,640 us step for a dense 1.2 B model at batch 64, 128-token
prompts + 256 new tokens on an H200, where the live positions average 256 of 384
(docs/benchmarks.md, "Generation"). Here each (row, key/value head, split of the sequence) is one
program that computes the partial softmax of the head's G query heads over its split, loading
only the keys the mask leaves live (a dead key's lane reads no memory: the columns past the current
token, which causality masks, and the prompt's left padding), then a second kernel merges the
splits by their log-sum-exp. Which keys are live is read from the mask on the device, as the CUDA
graph replays the step with no host sync.

fp32 accumulation, the inputs' dtype in the products (fp32 inputs: full fp32 products, no TF32).
It runs where `rl.generation.triton_runs` says Triton does (a CUDA tensor, or the CPU under
TRITON_INTERPRET=1); Triton is not a dependency of the project.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from rl.generation.triton_runs import INTERPRET

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (CI, CPU machines): grouped_decode_attention keeps sdpa
    triton = None

__all__ = ["BLOCK_N", "FEW_PROGRAMS", "LAUNCH", "Launch", "flash_decode", "launch_flash_decode", "launch_for",
           "num_splits"]

BLOCK_N = 64  # keys per block: the unit a program skips when the mask leaves it dead
# splits are chosen so rows x key/value heads x splits reach PROGRAMS_PER_SM programs an SM: enough to
# hide the memory's latency (at 2 an SM, dense_1b's batch-64 step took 24 us a layer for 17 MB of live
# cache, 2026-12-04), few enough that the merge stays small
PROGRAMS_PER_SM = 8


@dataclass(frozen=True)
class Launch:
    """How the two kernels are launched: the op's `LAUNCH`; bench/decode_kernels.py times others.

    The defaults are the sweep's (one H200, 2026-12-05, bench/results/decode_kernels.jsonl; dense_1b's
    heads, 384 cache columns, 256 live): one warp a merge program (17.3 -> 14.9 us at batch 64, 70.2 ->
    58.1 at 256), and at batch 256 8 programs an SM with dead blocks loaded under the mask (70.2 ->
    54.5; at batch 64 it costs 0.9 us); the three together were not timed in one run."""

    block_n: int = BLOCK_N
    programs_per_sm: int = PROGRAMS_PER_SM
    skip_dead: bool = False  # True: the split kernel branches over a block with no live key
    split_warps: int = 4
    merge_warps: int = 1
    split_stages: int | None = None  # the split kernel's software-pipeline depth; None: Triton's default


LAUNCH = Launch()
# where (row, key/value head) programs number at most 2 an SM (dense_1b's batch 64 on an H200: 256),
# the sweep's best was one block a split and dead blocks branched over, with one-warp merges: 14.9 us
# against 18.2 for LAUNCH's shape (2026-12-05 04:08 UTC, b267246); at batch 256 LAUNCH's was best
FEW_PROGRAMS = Launch(programs_per_sm=16, skip_dead=True)


def launch_for(programs: int, multiprocessors: int) -> Launch:
    """The launch the sweep found best for `programs` (rows x key/value heads): `FEW_PROGRAMS` at
    up to 2 an SM, else `LAUNCH` (`flash_decode(by_batch=True)`; bench/decode_kernels.py's rows)."""
    return FEW_PROGRAMS if programs <= 2 * multiprocessors else LAUNCH


@functools.cache
def _multiprocessors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132


def num_splits(programs: int, length: int, multiprocessors: int, launch: Launch = LAUNCH) -> int:
    """Splits of the sequence so that `programs` (rows x key/value heads) x splits >= programs_per_sm x
    the SMs, at most one per `block_n` block of keys."""
    return max(1, min(-(-length // launch.block_n), -(-launch.programs_per_sm * multiprocessors // programs)))


if triton is not None:

    @triton.jit
    def _split_kernel(Q, K, V, Mask, Bound, OutPart, LsePart, scale, length, kv_heads, bound_offset,
                      sqb, sqh, sqd, skb, skh, skn, skd, svb, svh, svn, svd, smb, smn,
                      G: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCKS: tl.constexpr,
                      D: tl.constexpr, HAS_MASK: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                      SKIP_DEAD: tl.constexpr, HAS_BOUND: tl.constexpr):
        """Program (split s, row b x kv head h): the G query heads' softmax over the split's live keys,
        normalised, and its log-sum-exp (-inf, output 0, when the split has no live key). UPCAST:
        products in fp32 (the interpreter multiplies bf16's raw bits). SKIP_DEAD: a block with no
        live key is branched over; off, its keys are loaded under the mask (a dead lane reads no
        memory) and, with no branch in the loop, Triton can pipeline the blocks' loads.

        HAS_BOUND: the columns written so far end at Bound[0] + bound_offset (the cache's device
        write position, read once). Keys and values are then loaded under that end alone, beside
        the mask's bytes instead of after them (a load that waits for another costs a memory latency
        a block; a block past the end reads nothing, as a dead block does without the bound); the
        mask still decides which keys count, and a key it leaves out is zeroed after its load (a
        hole's column holds anything)."""
        s = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // kv_heads
        h = bh % kv_heads
        num_s = tl.num_programs(0)
        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, D)
        n = tl.arange(0, BLOCK_N)
        q = tl.load(Q + b * sqb + (h * G + g)[:, None] * sqh + d[None, :] * sqd, mask=g[:, None] < G, other=0.0)
        if UPCAST:
            q = q.to(tl.float32)
        m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, D], tl.float32)
        end = length
        if HAS_BOUND:
            end = tl.minimum(tl.load(Bound).to(tl.int32) + bound_offset, length)
        for i in range(BLOCKS):  # the split: BLOCKS blocks of keys from s x BLOCKS x BLOCK_N
            cols = (s * BLOCKS + i) * BLOCK_N + n
            written = cols < end
            live = written
            if HAS_MASK:
                live = live & (tl.load(Mask + b * smb + cols * smn, mask=written, other=0) != 0)
            if HAS_BOUND:
                loaded = written  # not the mask: the loads need not wait for its bytes
            else:
                loaded = live
            if not SKIP_DEAD or tl.max(live.to(tl.int32), axis=0) > 0:  # a dead block: its mask bytes only
                k = tl.load(K + b * skb + h * skh + cols[:, None] * skn + d[None, :] * skd, mask=loaded[:, None],
                            other=0.0)
                v = tl.load(V + b * svb + h * svh + cols[:, None] * svn + d[None, :] * svd, mask=loaded[:, None],
                            other=0.0)  # issued beside k's load, not after the scores
                if HAS_BOUND and HAS_MASK:  # a written key the mask leaves out: zero, whatever it held
                    k = tl.where(live[:, None], k, 0.0)
                    v = tl.where(live[:, None], v, 0.0)
                if UPCAST:
                    k, v = k.to(tl.float32), v.to(tl.float32)
                scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
                scores = tl.where(live[None, :], scores, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(scores, axis=1))
                m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)  # an all-dead block so far: no NaN
                alpha = tl.exp(m_i - m_safe)
                p = tl.exp(scores - m_safe[:, None])
                l_i = l_i * alpha + tl.sum(p, axis=1)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
                m_i = m_new
        any_live = l_i > 0
        out = tl.where(any_live[:, None], acc / tl.where(any_live, l_i, 1.0)[:, None], 0.0)
        lse = tl.where(any_live, m_i + tl.log(tl.where(any_live, l_i, 1.0)), float("-inf"))
        row = (bh * num_s + s) * G + g  # OutPart [B, Hkv, S, G, D], LsePart [B, Hkv, S, G], contiguous
        tl.store(OutPart + row[:, None] * D + d[None, :], out, mask=g[:, None] < G)
        tl.store(LsePart + row, lse, mask=g < G)

    @triton.jit
    def _merge_kernel(OutPart, LsePart, Out, Gate, splits, kv_heads, sob, soh, sgb, sgh, sgd,
                      G: tl.constexpr, BLOCK_S: tl.constexpr, D: tl.constexpr, HAS_GATE: tl.constexpr):
        """Program (row b x query head): the splits' outputs weighted by exp(lse - max lse), times
        sigmoid(gate) with HAS_GATE."""
        bq = tl.program_id(0)
        b = bq // (kv_heads * G)
        hq = bq % (kv_heads * G)
        h = hq // G
        g = hq % G
        s = tl.arange(0, BLOCK_S)
        d = tl.arange(0, D)
        row = ((b * kv_heads + h) * splits + s) * G + g
        lse = tl.load(LsePart + row, mask=s < splits, other=float("-inf"))
        top = tl.max(lse, axis=0)
        w = tl.where(lse > float("-inf"), tl.exp(lse - tl.where(top > float("-inf"), top, 0.0)), 0.0)
        part = tl.load(OutPart + row[:, None] * D + d[None, :], mask=(s < splits)[:, None], other=0.0)
        total = tl.sum(w, axis=0)
        out = tl.sum(w[:, None] * part, axis=0) / tl.where(total > 0, total, 1.0)
        if HAS_GATE:
            out = out * tl.sigmoid(tl.load(Gate + b * sgb + hq * sgh + d * sgd).to(tl.float32))
        tl.store(Out + b * sob + hq * soh + d, out.to(Out.dtype.element_ty))


@torch.library.custom_op("rl::flash_decode", mutates_args=())
def flash_decode(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                 scale: float, gate: torch.Tensor | None = None, by_batch: bool = False,
                 written: torch.Tensor | None = None, written_offset: int = 0) -> torch.Tensor:
    """Attention of one query token per row over a cache, a torch op (opaque to `torch.compile`).

    Args:
        query: [B, Hq, 1, D]; query head i belongs to key/value head i // (Hq // Hkv).
        key, value: [B, Hkv, L, D], D a power of two (64, 128, 256).
        mask: bool, [B, 1, 1, >= L] (sdpa's: True attends) or None (every key live).
        gate: [B, Hq, D] (any strides) or None: the output times sigmoid(gate), in fp32 before the
            output's rounding (Qwen3.5's gated attention, `rl.generation.attention_step`).
        by_batch: launched as `launch_for` says for its rows (the generation worker's,
            `rl.generation.decode_attention.launch_by_batch`), else as `LAUNCH`.
        written, written_offset: a one-element integer tensor on the device (a static cache
            layer's write position) such that written[0] + written_offset columns of every row are
            written, the rest not; or None. With it the kernel loads keys under that end without
            waiting for the mask (`_split_kernel`'s HAS_BOUND); the mask, which must leave out
            every column from that end on, still decides.
    Returns:
        [B, 1, Hq, D] in the query's dtype (HF's attention-function layout).
    """
    launch = launch_for(query.shape[0] * key.shape[1], _multiprocessors(query.device)) if by_batch else LAUNCH
    return launch_flash_decode(query, key, value, mask, scale, launch, gate, written, written_offset)


def launch_flash_decode(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                        scale: float, launch: Launch, gate: torch.Tensor | None = None,
                        written: torch.Tensor | None = None, written_offset: int = 0) -> torch.Tensor:
    """`flash_decode` launched as `launch` says."""
    B, Hq, _, D = query.shape
    Hkv, L = key.shape[1], key.shape[2]
    G = Hq // Hkv
    blocks = -(-L // launch.block_n)
    per_split = -(-blocks // num_splits(B * Hkv, L, _multiprocessors(query.device), launch))  # blocks a split
    splits = -(-blocks // per_split)
    part = torch.empty(B, Hkv, splits, G, D, dtype=torch.float32, device=query.device)
    lse = torch.empty(B, Hkv, splits, G, dtype=torch.float32, device=query.device)
    out = torch.empty(B, 1, Hq, D, dtype=query.dtype, device=query.device)
    flags = mask[:, 0, 0].view(torch.uint8) if mask is not None else query  # query: an unread placeholder
    upcast = INTERPRET and query.dtype == torch.bfloat16
    precision = "ieee" if query.dtype == torch.float32 or upcast else "tf32"  # bf16/fp16 products ignore it
    _split_kernel[(splits, B * Hkv)](
        query, key, value, flags, written if written is not None else flags, part, lse, scale, L, Hkv, written_offset,
        query.stride(0), query.stride(1), query.stride(3), *key.stride(), *value.stride(),
        flags.stride(0) if flags.shape[0] > 1 else 0, flags.stride(-1),  # a mask of one row serves every row
        G=G, BLOCK_G=max(16, triton.next_power_of_2(G)), BLOCK_N=launch.block_n, BLOCKS=per_split, D=D,
        HAS_MASK=mask is not None, PRECISION=precision, UPCAST=upcast, SKIP_DEAD=launch.skip_dead,
        HAS_BOUND=written is not None,
        num_warps=launch.split_warps, **({"num_stages": launch.split_stages} if launch.split_stages else {}))
    gate, gate_strides = (gate, gate.stride()) if gate is not None else (out, (0, 0, 0))  # out: an unread placeholder
    _merge_kernel[(B * Hq,)](part, lse, out, gate, splits, Hkv, out.stride(0), out.stride(2), *gate_strides,
                             G=G, BLOCK_S=max(2, triton.next_power_of_2(splits)), D=D, HAS_GATE=gate is not out,
                             num_warps=launch.merge_warps)
    return out


@flash_decode.register_fake
def _(query, key, value, mask, scale, gate=None, by_batch=False, written=None, written_offset=0):
    B, Hq, _, D = query.shape
    return query.new_empty(B, 1, Hq, D)


def default_scale(query: torch.Tensor, scaling: float | None) -> float:
    """sdpa's default scale when the model gives none."""
    return 1.0 / math.sqrt(query.shape[-1]) if scaling is None else float(scaling)
