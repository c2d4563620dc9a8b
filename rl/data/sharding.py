"""Split a batch receipt over DP ranks: equal row counts, balanced token totals.

Every rank must get the same number of rows (micro-batching and collectives assume it), and
the step takes as long as the rank with the most tokens. The reference sorts by length and
strides (`order[r::dp]`), which hands rank 0 the largest row of every round, so its excess
over the lightest rank grows with the number of rounds. Here:

1. Two starts: the round greedy (sort rows by length, descending, cut them into rounds of `dp`
   rows; in each round the longest row goes to the currently lightest rank, the next to the next
   lightest, and so on: O(n log dp)) and the balanced differencing method (Karmarkar-Karp over
   the rounds: `_differencing_table`); the better one goes on.
2. Paired swap rounds (`_paired_swaps`): the i-th heaviest rank and the i-th lightest swap the
   row pair whose gain is closest to half their gap, every pair at once.
3. Single swaps, bounded: take the heaviest rank H and the lighter ranks, lightest first;
   with the first R that has a row pair of gain 0 < delta < L_H - L_R, swap the pair whose
   delta is closest to (L_H - L_R) / 2 (one searchsorted over R's sorted rows). Swaps keep
   row counts, never raise the maximum, and strictly lower the sum of squared loads; at most
   `max_swaps` of them (default `dp`) and 2 pair searches per allowed swap, in all.
4. Sort+stride is costed too (O(n)); only when its maximum is lower is it improved and the
   better of the two (lower max, then lower spread) returned, so we are never worse than it.

Bound (proved in docs/data-plane.md): with S the largest within-round length spread
`max_k (first_k - last_k)` of the sorted rows (S <= max length - min length), the refined round
greedy has max - min rank tokens <= S, so the returned assignment has
max rank tokens <= mean + (dp - 1) / dp * S, and max rank tokens <= sort+stride's.

Measured (bench/bench_shard_balance.py --large-dp, docs/benchmarks.md): 16,384 rows of lognormal
lengths (mu 6.3, sigma 1.0) over DP 256 at max/mean 1.00001 in 25-40 ms of CPU on the loaded
2-core dev box (steps 1 and 3 alone: 1.0025); the sharder before those took 12.7 s.
Integer arithmetic, stable sorts and first-index tie-breaks: the result is deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import chain

import numpy as np

from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta

__all__ = ["shard_keys_by_seqlen", "assign_balanced", "assign_stride", "round_spread_bound"]

ORIGINAL_INDICES = "_dp_original_indices"


def _sorted_desc(lengths: np.ndarray) -> np.ndarray:
    """Row indices by length descending, ties by index (a stable sort of the negated lengths)."""
    return np.argsort(-lengths, kind="stable")


def _as_array(lengths: Sequence[int]) -> np.ndarray:
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def _stride_table(lengths: np.ndarray, dp: int) -> np.ndarray:
    """`[dp, n/dp]` row table of sort+stride: rank r holds `order[r::dp]`."""
    return _sorted_desc(lengths).reshape(-1, dp).T.copy()


def assign_stride(lengths: Sequence[int], dp: int) -> list[list[int]]:
    """The reference assignment: sort descending, rank r takes `order[r::dp]`."""
    order = _sorted_desc(_as_array(lengths)).tolist()
    return [order[r::dp] for r in range(dp)]


def _greedy_table(lengths: np.ndarray, dp: int) -> np.ndarray:
    """`[dp, n/dp]` row table of the round greedy (rank r's row of round k at `[r, k]`)."""
    rounds = _sorted_desc(lengths).reshape(-1, dp)
    table = np.empty((dp, len(rounds)), dtype=np.int64)
    loads = np.zeros(dp, dtype=np.int64)
    for k, block in enumerate(rounds):
        lightest_first = np.argsort(loads, kind="stable")  # ties: lower rank first
        table[lightest_first, k] = block
        loads[lightest_first] += lengths[block]
    return table


def _differencing_table(lengths: np.ndarray, dp: int) -> np.ndarray:
    """`[dp, n/dp]` row table of the balanced largest differencing method (Karmarkar-Karp).

    Each round of `dp` sorted rows is a partial assignment (one row a rank); the two partial
    assignments with the largest spread (max - min load) merge, the heaviest rank of one taking
    the lightest of the other, until one is left. Why: the round greedy cannot undo its first
    rounds when rows are few and heavy-tailed (8,192 lognormal rows, mu 4, over DP 256 left it
    at max/mean 1.72; differencing: 1.0). A merge's spread is at most the larger of the two
    spreads (pair a descending with b ascending), so Lemma 1's bound holds here too.
    """
    rounds = _sorted_desc(lengths).reshape(-1, dp)
    heap = []
    for k, block in enumerate(rounds):
        loads = lengths[block]
        heapq.heappush(heap, (-int(loads.max() - loads.min()), k, loads, block[:, None]))
    count = len(heap)
    while len(heap) > 1:
        _, _, loads_a, rows_a = heapq.heappop(heap)
        _, _, loads_b, rows_b = heapq.heappop(heap)
        a, b = np.argsort(-loads_a, kind="stable"), np.argsort(loads_b, kind="stable")
        loads = loads_a[a] + loads_b[b]
        heapq.heappush(heap, (-int(loads.max() - loads.min()), count, loads, np.hstack([rows_a[a], rows_b[b]])))
        count += 1
    return heap[0][3]


SCAN_PER_SWAP = 2  # pair searches per allowed swap, in all: bounds refinement at O(n log m)
_NO_SWAP = np.iinfo(np.int64).max


def _best_swap(a: np.ndarray, b: np.ndarray, gap: int) -> tuple[int, int, int] | None:
    """(delta, i, j) of the swap a[i] <-> b[j] with 0 < delta < gap and delta closest to gap/2.

    For each a[i] the best partner has length nearest `a[i] - gap/2`; only the two sorted
    neighbours of that target can be it. Ties: the first candidate with the smallest score.
    """
    by_len = np.argsort(b, kind="stable")
    values = b[by_len]
    pos = np.searchsorted(2 * values, 2 * a - gap, side="left")  # 2x keeps it in integers
    last = len(values) - 1
    ks = np.empty((2, len(a)), dtype=np.int64)  # the two neighbours; np.clip is slow here
    np.maximum(pos - 1, 0, out=ks[0])
    np.minimum(pos, last, out=ks[1])
    delta = a - values[ks]
    score = np.where((delta > 0) & (delta < gap), np.abs(gap - 2 * delta), _NO_SWAP)
    best = int(np.argmin(score))  # the pair's new max is (H + R + score) / 2; first wins ties
    if score.flat[best] == _NO_SWAP:
        return None
    side, i = divmod(best, len(a))
    return int(delta[side, i]), i, int(by_len[ks[side, i]])


PAIRED_ROUNDS = 16  # rounds of simultaneous swaps between the heaviest and lightest ranks, at most


def _paired_swaps(table: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Rounds of improving swaps between disjoint rank pairs, all pairs at once; a new table.

    Each round pairs the i-th heaviest rank with the i-th lightest and makes in every pair the
    swap `_best_swap` would (0 < delta < gap, delta closest to gap / 2), vectorised over the
    pairs: one round costs about what one single swap of `_refine_table` costs, so the many ranks
    just above the mean fall together. Why: one swap at a time out of the heaviest rank left
    16,384 lognormal rows over DP 256 at max/mean 1.0025 after its dp swaps. Every swap keeps
    both loads strictly inside the pair's old [light, heavy] (Lemma 2), so the bound holds.
    """
    table = table.copy()
    dp, m = table.shape
    half = dp // 2
    if half == 0 or m == 0:
        return table
    rows = np.arange(half)[:, None]
    # Row offsets keep each pair's candidates apart in one flat searchsorted (2x: integers only).
    span = 4 * (int(lengths.max(initial=0)) + 1)
    offset = rows * span
    previous_max = None
    for _ in range(PAIRED_ROUNDS):
        loads = lengths[table].sum(axis=1)
        if previous_max is not None and loads.max() >= previous_max:
            break  # a round that no longer lowers the maximum: the single swaps take over
        previous_max = loads.max()
        order = np.argsort(loads, kind="stable")
        light, heavy = order[:half], order[::-1][:half]
        gap = loads[heavy] - loads[light]
        if not (gap > 1).any():
            break
        a = lengths[table[heavy]]
        by_len = np.argsort(lengths[table[light]], axis=1, kind="stable")
        values = np.take_along_axis(lengths[table[light]], by_len, axis=1)
        pos = np.searchsorted((2 * values + offset).ravel(), (2 * a - gap[:, None] + offset).ravel())
        pos = pos.reshape(half, m) - rows * m
        ks = np.stack([np.maximum(pos - 1, 0), np.minimum(pos, m - 1)])  # [2, half, m]
        delta = a[None] - np.take_along_axis(np.broadcast_to(values, (2, half, m)), ks, axis=2)
        score = np.where((delta > 0) & (delta < gap[None, :, None]), np.abs(gap[None, :, None] - 2 * delta),
                         _NO_SWAP)
        flat = score.transpose(1, 0, 2).reshape(half, 2 * m)
        best = np.argmin(flat, axis=1)
        ok = flat[np.arange(half), best] != _NO_SWAP
        if not ok.any():
            break
        side, i = np.divmod(best[ok], m)
        p = np.flatnonzero(ok)
        j = by_len[p, ks[side, p, i]]
        h, r = heavy[p], light[p]
        table[h, i], table[r, j] = table[r, j], table[h, i].copy()
    return table


def _lighter_ranks(loads: np.ndarray, h: int) -> list[int]:
    """Ranks lighter than `h`, lightest first (ties: lower rank first)."""
    order = np.argsort(loads, kind="stable")
    return [r for r in order.tolist() if loads[r] < loads[h]]


def _refine_table(table: np.ndarray, lengths: np.ndarray, max_swaps: int) -> np.ndarray:
    """Bounded improving swaps out of the heaviest rank (module doc, step 2); a new table.

    The lightest rank is tried first, then the next lightest. One pair search costs
    O(m log m) with m = n/dp rows a rank; at most `max_swaps` swaps and `SCAN_PER_SWAP *
    max_swaps` pair searches in all, so dp swaps cost O(n log m). An unbounded scan of every
    lighter rank made a pareto batch of 512 rows over DP 64 take 315 ms (issue 15).
    """
    table = table.copy()
    loads = lengths[table].sum(axis=1)
    searches = SCAN_PER_SWAP * max_swaps
    for _ in range(max_swaps):
        h, r = int(np.argmax(loads)), int(np.argmin(loads))  # first max, first min
        if loads[r] >= loads[h] or searches <= 0:
            break
        searches -= 1
        swap = _best_swap(lengths[table[h]], lengths[table[r]], int(loads[h] - loads[r]))
        if swap is None:
            for r in _lighter_ranks(loads, h)[1 : 1 + searches]:
                searches -= 1
                swap = _best_swap(lengths[table[h]], lengths[table[r]], int(loads[h] - loads[r]))
                if swap is not None:
                    break
        if swap is None:
            break
        delta, i, j = swap
        table[h, i], table[r, j] = table[r, j], table[h, i]
        loads[h] -= delta
        loads[r] += delta
    return table


def _improve(table: np.ndarray, lengths: np.ndarray, max_swaps: int) -> np.ndarray:
    """Step 2: the paired rounds, then single swaps out of the heaviest rank; a budget of 0: neither."""
    if max_swaps <= 0:
        return table
    return _refine_table(_paired_swaps(table, lengths), lengths, max_swaps)


def _quality(table: np.ndarray, lengths: np.ndarray) -> tuple[int, int]:
    loads = lengths[table].sum(axis=1)
    return int(loads.max()), int(loads.max() - loads.min())


def _round_greedy(lengths: Sequence[int], dp: int) -> list[list[int]]:
    """Step 1 alone, as row lists (tests check Lemma 1 on it)."""
    return _greedy_table(_as_array(lengths), dp).tolist()


def _refine(ranks: list[list[int]], lengths: Sequence[int], max_swaps: int) -> list[list[int]]:
    """Step 2 alone on equal-length row lists (tests check Lemma 2 on it)."""
    table = np.asarray(ranks, dtype=np.int64).reshape(len(ranks), -1)
    return _refine_table(table, _as_array(lengths), max_swaps).tolist()


def assign_balanced(
    lengths: Sequence[int], dp: int, *, max_swaps: int | None = None
) -> list[list[int]]:
    """Row indices per rank (each list ascending), `len(lengths) // dp` rows each.

    Args:
        lengths: non-negative token count per row.
        dp: number of ranks; must divide `len(lengths)`.
        max_swaps: refinement budget per candidate; default `dp`.

    Raises:
        ValueError: when `dp` is not positive.
        DataIntegrityError: when `dp` does not divide `len(lengths)` (names both numbers).
    """
    n = len(lengths)
    if dp <= 0:
        raise ValueError(f"shard_keys_by_seqlen: dp must be positive, got {dp}")
    if n % dp != 0:
        raise DataIntegrityError(
            f"shard_keys_by_seqlen: {n} rows cannot be split evenly over dp={dp} ranks "
            f"({n} % {dp} = {n % dp}); make the batch size a multiple of the DP size"
        )
    if n == 0:
        return [[] for _ in range(dp)]
    arr = _as_array(lengths)
    budget = dp if max_swaps is None else max_swaps
    start = min((_greedy_table(arr, dp), _differencing_table(arr, dp)), key=lambda t: _quality(t, arr))
    best = _improve(start, arr, budget)
    stride = _stride_table(arr, dp)
    if _quality(stride, arr)[0] < _quality(best, arr)[0]:
        stride = _improve(stride, arr, budget)
        best = min((best, stride), key=lambda t: _quality(t, arr))
    return np.sort(best, axis=1).tolist()


def round_spread_bound(lengths: Sequence[int], dp: int) -> int:
    """The largest within-round length spread of the sorted rows: our bound on max - min load."""
    ordered = sorted(lengths, reverse=True)
    rounds = [ordered[s : s + dp] for s in range(0, len(ordered), dp)]
    return max((r[0] - r[-1] for r in rounds), default=0)


def shard_keys_by_seqlen(meta: KVBatchMeta, dp: int) -> list[KVBatchMeta]:
    """Split `meta` into `dp` shards of equal row count with balanced token totals.

    Each shard keeps the caller's relative row order and records the caller's row index of
    each of its rows in `extra_info["_dp_original_indices"]` (a tuple of ints).

    Each row goes to exactly one shard (checked once over the whole assignment, after which the
    shards are cut without per-shard re-checks).

    Raises:
        DataIntegrityError: when `len(meta)` is not a multiple of `dp`.
    """
    assignment = assign_balanced(meta.sequence_lengths, dp)
    n = len(meta)
    flat = np.fromiter(chain.from_iterable(assignment), dtype=np.int64)
    if len(assignment) != dp or len(flat) != n or (
        n and (flat.min() < 0 or flat.max() >= n or np.bincount(flat, minlength=n).max() != 1)
    ):
        raise DataIntegrityError(
            f"shard_keys_by_seqlen: the assignment of {n} rows over dp={dp} is not a partition"
        )
    batch_extra = meta._batch_extra()
    return [meta._rows(rows, {**batch_extra, ORIGINAL_INDICES: tuple(rows)}) for rows in assignment]
