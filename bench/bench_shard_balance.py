"""Shard balance of `shard_keys_by_seqlen` vs the reference's sort+stride, and driver memory.

    python bench/bench_shard_balance.py                  # 512 rows, DP 8, 20 seeds per distribution
    python bench/bench_shard_balance.py --rows 1024 --dp 16 --seeds 50
    python bench/bench_shard_balance.py --scale       # issue 15: n x DP x lengths, time + balance
    python bench/bench_shard_balance.py --dispatch    # issue 15: dp_dispatch driver cost, 16k rows
    python bench/bench_shard_balance.py --large-dp    # 16,384 lognormal rows over DP 256: time, max/mean

Table 1: max rank tokens / mean rank tokens (1.0 is perfect; the slowest rank sets the step
time), mean and worst over seeds, for realistic response-length distributions, plus our
proved bound `1 + (dp-1)/dp * round_spread / mean` and the sharder's time.

Table 2: what the driver holds per batch on each path: a `KVBatchMeta` receipt vs a legacy
`BatchedDataDict` of padded GRPO columns. tracemalloc measures the Python heap (keys, tags,
lists); it cannot see torch's CPU allocator, so tensor storage is added from `nbytes`.
Table 3 (`--scale`, issue 15): rows n in {512, 4k, 16k, 64k} x DP in {8, 64, 256} x lengths
(lognormal, pareto, uniform, powers of two): median time and max/mean of ours, sort+stride and
the previous sharder (bench/shard_previous.py, run only where it takes seconds, not minutes),
then the complexity check: time(4n) / time(n) for each DP and distribution (< 8 required).
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from shard_previous import assign_balanced_previous  # noqa: E402

from rl.data import BatchedDataDict, KVBatchMeta, dp_dispatch, make_key  # noqa: E402
from rl.data.sharding import assign_balanced, assign_stride, round_spread_bound  # noqa: E402

MAX_LEN = 4096


def _clip(x: float) -> int:
    return max(1, min(MAX_LEN, int(x)))


DISTRIBUTIONS: dict[str, Callable[[random.Random], int]] = {
    "lognormal (median 600)": lambda r: _clip(r.lognormvariate(math.log(600), 0.8)),
    "bimodal (short 150 / long 2500)": lambda r: _clip(
        r.gauss(150, 40) if r.random() < 0.6 else r.gauss(2500, 500)
    ),
    "uniform [64, 4096]": lambda r: r.randint(64, MAX_LEN),
    "long tail (pareto, 5% hit max)": lambda r: _clip(200 * r.paretovariate(1.2)),
    "grouped (G=8 share a prompt)": None,  # type: ignore[dict-item]  # filled below
}


def _grouped(r: random.Random, n: int) -> list[int]:
    """GRPO: 8 generations per prompt, prompt length shared, responses vary."""
    out = []
    for _ in range(n // 8):
        prompt = _clip(r.lognormvariate(math.log(300), 0.6))
        out += [_clip(prompt + r.lognormvariate(math.log(400), 0.9)) for _ in range(8)]
    return out


def _ratio(ranks: list[list[int]], lengths: list[int], dp: int) -> float:
    loads = [sum(lengths[i] for i in r) for r in ranks]
    return max(loads) / (sum(loads) / dp)


def balance_table(rows: int, dp: int, seeds: int) -> str:
    lines = [
        f"Shard balance, {rows} rows, DP {dp}, {seeds} seeds: "
        "max / mean rank tokens (1.000 = perfect)",
        "",
        "| distribution | stride mean | stride worst | ours mean | ours worst "
        "| our bound (worst) | ours ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, draw in DISTRIBUTIONS.items():
        stride, ours, bounds, times = [], [], [], []
        for seed in range(seeds):
            r = random.Random(seed)
            lengths = _grouped(r, rows) if draw is None else [draw(r) for _ in range(rows)]
            t0 = time.perf_counter()
            balanced = assign_balanced(lengths, dp)
            times.append((time.perf_counter() - t0) * 1e3)
            ours.append(_ratio(balanced, lengths, dp))
            stride.append(_ratio(assign_stride(lengths, dp), lengths, dp))
            mean = sum(lengths) / dp
            bounds.append(1 + (dp - 1) / dp * round_spread_bound(lengths, dp) / mean)
        lines.append(
            f"| {name} | {statistics.mean(stride):.4f} | {max(stride):.4f} | "
            f"{statistics.mean(ours):.5f} | {max(ours):.5f} | {max(bounds):.4f} | "
            f"{statistics.median(times):.1f} |"
        )
    return "\n".join(lines)


def _legacy_batch(rows: int, seq: int, lengths: list[int]) -> BatchedDataDict:
    """The padded columns a legacy GRPO driver holds after rollout, scoring and log-probs."""
    return BatchedDataDict(
        {
            "input_ids": torch.empty(rows, seq, dtype=torch.long),
            "token_mask": torch.empty(rows, seq, dtype=torch.bool),
            "generation_logprobs": torch.empty(rows, seq),
            "prev_logprobs": torch.empty(rows, seq),
            "reference_logprobs": torch.empty(rows, seq),
            "advantages": torch.empty(rows),
            "sample_mask": torch.empty(rows),
            "input_lengths": torch.tensor(lengths),
            "prompt_text": [f"What is {i} + {i}?" for i in range(rows)],
        }
    )


def _meta(rows: int, lengths: list[int]) -> KVBatchMeta:
    return KVBatchMeta(
        partition_id="rollout",
        keys=[make_key(f"{i // 8:08x}", i % 8) for i in range(rows)],
        sequence_lengths=lengths,
        fields=["input_ids", "token_mask", "generation_logprobs", "prev_logprobs", "advantages"],
        tags=[{"reward": 1.0, "truncated": False} for _ in range(rows)],
    )


def _measure(build: Callable[[], object]) -> tuple[int, int]:
    """(tracemalloc peak bytes, tensor bytes) of building and holding one object."""
    tracemalloc.start()
    obj = build()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tensors = (
        sum(v.nbytes for v in obj.values() if isinstance(v, torch.Tensor))
        if isinstance(obj, dict)
        else 0
    )
    return peak, tensors


def memory_table(seq: int, sizes: list[int]) -> str:
    lines = [
        f"Driver memory per batch (padded to {seq} tokens): "
        "Python heap (tracemalloc peak) + tensor storage",
        "",
        "| rows | meta heap | legacy heap | legacy tensors | legacy total | legacy / meta |",
        "|---|---|---|---|---|---|",
    ]
    for rows in sizes:
        lengths = [1 + (i * 7919) % seq for i in range(rows)]
        meta_heap, _ = _measure(lambda r=rows, ls=lengths: _meta(r, ls))
        legacy_heap, legacy_tensors = _measure(lambda r=rows, ls=lengths: _legacy_batch(r, seq, ls))
        total = legacy_heap + legacy_tensors
        lines.append(
            f"| {rows} | {meta_heap / 2**10:.0f} KiB | {legacy_heap / 2**10:.0f} KiB | "
            f"{legacy_tensors / 2**20:.1f} MiB | {total / 2**20:.1f} MiB | "
            f"{total / meta_heap:.0f}x |"
        )
    return "\n".join(lines)


SCALE_ROWS = (512, 4096, 16384, 65536)
SCALE_DP = (8, 64, 256)
PREVIOUS_MAX_ROWS = 4096  # the previous sharder takes 12.7 s at 16k x DP 256, minutes at 64k


def _scale_lengths(name: str, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    if name == "lognormal":
        x = rng.lognormal(math.log(600), 0.8, n)
    elif name == "pareto":
        x = 200 * (1 + rng.pareto(1.2, n))
    elif name == "uniform":
        x = rng.integers(64, MAX_LEN + 1, n)
    else:  # powers of two: many exact ties, the sort's tie-breaks matter
        x = 2.0 ** rng.integers(4, 13, n)
    return np.clip(x, 1, MAX_LEN).astype(np.int64).tolist()


def _timed(fn: Callable[[], list[list[int]]], repeats: int) -> tuple[float, list[list[int]], float]:
    """(median wall ms, the last result, median CPU ms): CPU time shows the cost on a shared box."""
    times, cpu, out = [], [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(times), out, statistics.median(cpu)


def scale_table(repeats: int) -> str:
    lines = [
        f"Sharding at scale: median of {repeats} runs (previous sharder: 1 run), "
        "max / mean rank tokens",
        "",
        "| rows | DP | lengths | ours ms wall / CPU | ours max/mean | stride ms | stride max/mean "
        "| previous ms | previous max/mean |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    times: dict[tuple[int, int, str], float] = {}
    for n in SCALE_ROWS:
        for dp in SCALE_DP:
            for name in ("lognormal", "pareto", "uniform", "powers of two"):
                lengths = _scale_lengths(name, n, seed=n + dp)
                ms, ours, cpu = _timed(lambda: assign_balanced(lengths, dp), repeats)
                stride_ms, stride, _ = _timed(lambda: assign_stride(lengths, dp), repeats)
                times[n, dp, name] = cpu
                prev = "-", "-"
                if n <= PREVIOUS_MAX_ROWS:
                    prev_ms, previous, _ = _timed(lambda: assign_balanced_previous(lengths, dp), 1)
                    prev = f"{prev_ms:.0f}", f"{_ratio(previous, lengths, dp):.5f}"
                lines.append(
                    f"| {n} | {dp} | {name} | {ms:.1f} / {cpu:.1f} | "
                    f"{_ratio(ours, lengths, dp):.5f} | "
                    f"{stride_ms:.1f} | {_ratio(stride, lengths, dp):.5f} | {prev[0]} | {prev[1]} |"
                )
    pairs = [(a, b) for a in SCALE_ROWS for b in SCALE_ROWS if b == 4 * a]
    lines += ["", "Complexity: CPU time(4n) / CPU time(n) of ours (< 8 required)", "",
              "| DP | lengths | " + " | ".join(f"{a} -> {b}" for a, b in pairs) + " |",
              "|---|---|" + "---|" * len(pairs)]
    for dp in SCALE_DP:
        for name in ("lognormal", "pareto", "uniform", "powers of two"):
            ratios = [times[b, dp, name] / times[a, dp, name] for a, b in pairs]
            lines.append(f"| {dp} | {name} | " + " | ".join(f"{r:.1f}x" for r in ratios) + " |")
    return "\n".join(lines)


class _Group:
    """A policy group of `dp` in-process workers that return at once (driver cost only)."""

    def __init__(self, dp: int, returns: str) -> None:
        self.dp_size, self.returns, self.worker_s = dp, returns, 0.0

    def _run_on_ranks(self, method: str, shards: list[KVBatchMeta]) -> list:
        t0 = time.perf_counter()
        if self.returns == "meta":  # the worker wrote its column and hands back the receipt
            out: list = [s.with_fields("logprobs") for s in shards]
        else:  # row columns travel back through the driver
            out = [{"keys": list(s.keys), "logprobs": torch.zeros(len(s))} for s in shards]
        self.worker_s += time.perf_counter() - t0
        return out

    @dp_dispatch
    def get_logprobs(self, batch: BatchedDataDict) -> None:
        raise RuntimeError("legacy body must not run")


def dispatch_table(rows: int, dp: int, repeats: int) -> str:
    """Driver-side cost of one `dp_dispatch` on the memory-store receipt path (issue 15)."""
    lengths = _scale_lengths("lognormal", rows, seed=1)
    meta = _meta(rows, lengths)
    lines = [
        f"Driver-side dp_dispatch overhead, {rows} rows, simulated DP {dp} (in-process workers "
        f"that return at once), median of {repeats}",
        "",
        "| workers return | dispatch ms | of which sharding ms | per row us |",
        "|---|---|---|---|",
    ]
    shard_ms, _, _ = _timed(lambda: assign_balanced(list(meta.sequence_lengths), dp), repeats)
    for returns in ("meta", "row dict"):
        group = _Group(dp, "meta" if returns == "meta" else "dict")
        times = []
        for _ in range(repeats):
            group.worker_s = 0.0
            t0 = time.perf_counter()
            group.get_logprobs(meta)
            times.append((time.perf_counter() - t0 - group.worker_s) * 1e3)
        ms = statistics.median(times)
        lines.append(f"| {returns} | {ms:.0f} | {shard_ms:.0f} | {ms * 1e3 / rows:.1f} |")
    return "\n".join(lines)


def large_dp_table(repeats: int, seeds: int = 5) -> str:
    """Issue 31's case: 16,384 rows, lognormal lengths (mu 6.3, sigma 1.0, capped at 16,384), DP 256.
    Target: max/mean <= 1.001 against the lower bound max(mean, longest row), under 50 ms."""
    lines = [f"16,384 lognormal rows (mu 6.3, sigma 1.0, cap 16,384) over DP 256, median of {repeats} runs",
             "", "| seed | max / mean | lower bound / mean | ms wall / CPU |", "|---|---|---|---|"]
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        lengths = np.minimum(rng.lognormal(6.3, 1.0, 16384).astype(np.int64), 16384).clip(1).tolist()
        ms, ranks, cpu = _timed(lambda: assign_balanced(lengths, 256), repeats)
        mean = sum(lengths) / 256
        lines.append(f"| {seed} | {_ratio(ranks, lengths, 256):.6f} | {max(mean, max(lengths)) / mean:.4f} | "
                     f"{ms:.1f} / {cpu:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--dp", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--seq", type=int, default=MAX_LEN, help="padded length of the legacy columns"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--scale", action="store_true", help="only the issue-15 scale tables")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dispatch", action="store_true", help="only the dispatch overhead")
    parser.add_argument("--large-dp", action="store_true", help="only 16,384 lognormal rows over DP 256")
    args = parser.parse_args()
    if args.large_dp:
        print(large_dp_table(args.repeats))
        return
    if args.dispatch:
        print(dispatch_table(16384, 64, args.repeats))
        return
    if args.scale:
        print(scale_table(args.repeats))
        return
    print(balance_table(args.rows, args.dp, args.seeds))
    print()
    print(memory_table(args.seq, args.sizes))


if __name__ == "__main__":
    main()
