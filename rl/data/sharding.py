"""Split a batch receipt over DP ranks: equal row counts, balanced token totals.

Every rank must get the same number of rows (micro-batching and collectives assume it), and
the step takes as long as the rank with the most tokens. The reference sorts by length and
strides (`order[r::dp]`), which hands rank 0 the largest row of every round, so its excess
over the lightest rank grows with the number of rounds. Here:

1. Round greedy: sort rows by length, descending, and cut them into rounds of `dp` rows. In
   each round the longest row goes to the currently lightest rank, the next to the next
   lightest, and so on. Each rank gets exactly one row per round.
2. Swap refinement: while some row of the heaviest rank can be swapped with a shorter row of
   another rank so that both end below the old maximum, do the best such swap. Swaps keep row
   counts, never raise the maximum, and strictly lower the sum of squared loads, so they stop.
3. The same refinement is run from the sort+stride assignment; the better of the two
   (lower max, then lower spread) is returned, so we are never worse than the reference.

Bound (proved in docs/data-plane.md): with S the largest within-round length spread
`max_k (first_k - last_k)` of the sorted rows (S <= max length - min length), the refined round
greedy has max - min rank tokens <= S, so the returned assignment has
max rank tokens <= mean + (dp - 1) / dp * S, and max rank tokens <= sort+stride's.

Everything is integer arithmetic with index tie-breaks, so the result is deterministic.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta

__all__ = ["shard_keys_by_seqlen", "assign_balanced", "assign_stride", "round_spread_bound"]

ORIGINAL_INDICES = "_dp_original_indices"


def _sorted_desc(lengths: Sequence[int]) -> list[int]:
    return sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))


def assign_stride(lengths: Sequence[int], dp: int) -> list[list[int]]:
    """The reference assignment: sort descending, rank r takes `order[r::dp]`."""
    order = _sorted_desc(lengths)
    return [order[r::dp] for r in range(dp)]


def _round_greedy(lengths: Sequence[int], dp: int) -> list[list[int]]:
    order = _sorted_desc(lengths)
    ranks: list[list[int]] = [[] for _ in range(dp)]
    loads = [0] * dp
    for start in range(0, len(order), dp):
        lightest_first = sorted(range(dp), key=lambda r: (loads[r], r))
        for rank, row in zip(lightest_first, order[start : start + dp], strict=True):
            ranks[rank].append(row)
            loads[rank] += lengths[row]
    return ranks


def _best_swap(
    heavy: list[int], other: list[int], gap: int, lengths: Sequence[int]
) -> tuple[int, int, int] | None:
    """The swap (delta, i, j) of heavy[i] <-> other[j] with 0 < delta < gap, delta closest to gap/2.

    For each row of the heavy rank, the best partner has length nearest `a - gap/2`; only the
    two sorted neighbours of that target can be it (anything farther on one side is worse).
    """
    by_len = sorted(range(len(other)), key=lambda j: (lengths[other[j]], j))
    values = [lengths[other[j]] for j in by_len]
    best: tuple[int, int, int, int] | None = None
    for i, row in enumerate(heavy):
        a = lengths[row]
        pos = bisect.bisect_left(values, a - gap / 2)
        for k in (pos - 1, pos):
            if 0 <= k < len(values):
                delta = a - values[k]
                if 0 < delta < gap:
                    score = abs(gap - 2 * delta)  # the pair's new max is (H + R + score) / 2
                    cand = (score, delta, i, by_len[k])
                    if best is None or cand < best:
                        best = cand
    return None if best is None else best[1:]


def _refine(ranks: list[list[int]], lengths: Sequence[int], max_swaps: int) -> list[list[int]]:
    ranks = [list(r) for r in ranks]
    loads = [sum(lengths[i] for i in r) for r in ranks]
    for _ in range(max_swaps):
        h = max(range(len(ranks)), key=lambda r: (loads[r], -r))
        best: tuple[int, int, int, int] | None = None  # (new pair max, rank, i, j)
        for r in range(len(ranks)):
            if r == h or loads[r] >= loads[h]:
                continue
            swap = _best_swap(ranks[h], ranks[r], loads[h] - loads[r], lengths)
            if swap is not None:
                delta, i, j = swap
                pair_max = max(loads[h] - delta, loads[r] + delta)
                if best is None or pair_max < best[0]:
                    best = (pair_max, r, i, j)
        if best is None:
            break
        _, r, i, j = best
        a, b = ranks[h][i], ranks[r][j]
        ranks[h][i], ranks[r][j] = b, a
        loads[h] += lengths[b] - lengths[a]
        loads[r] += lengths[a] - lengths[b]
    return ranks


def _quality(ranks: list[list[int]], lengths: Sequence[int]) -> tuple[int, int]:
    loads = [sum(lengths[i] for i in r) for r in ranks]
    return max(loads), max(loads) - min(loads)


def assign_balanced(
    lengths: Sequence[int], dp: int, *, max_swaps: int | None = None
) -> list[list[int]]:
    """Row indices per rank (each list ascending), `len(lengths) // dp` rows each.

    Args:
        lengths: non-negative token count per row.
        dp: number of ranks; must divide `len(lengths)`.
        max_swaps: refinement budget per candidate; default `4 * len(lengths)`.
    """
    n = len(lengths)
    if dp <= 0:
        raise ValueError(f"shard_keys_by_seqlen: dp must be positive, got {dp}")
    if n % dp != 0:
        raise DataIntegrityError(
            f"shard_keys_by_seqlen: {n} rows cannot be split evenly over dp={dp} ranks "
            f"({n} % {dp} = {n % dp}); make the batch size a multiple of the DP size"
        )
    budget = 4 * n if max_swaps is None else max_swaps
    candidates = [
        _refine(_round_greedy(lengths, dp), lengths, budget),
        _refine(assign_stride(lengths, dp), lengths, budget),
    ]
    best = min(candidates, key=lambda ranks: _quality(ranks, lengths))
    return [sorted(r) for r in best]


def round_spread_bound(lengths: Sequence[int], dp: int) -> int:
    """The largest within-round length spread of the sorted rows: our bound on max - min load."""
    ordered = sorted(lengths, reverse=True)
    rounds = [ordered[s : s + dp] for s in range(0, len(ordered), dp)]
    return max((r[0] - r[-1] for r in rounds), default=0)


def shard_keys_by_seqlen(meta: KVBatchMeta, dp: int) -> list[KVBatchMeta]:
    """Split `meta` into `dp` shards of equal row count with balanced token totals.

    Each shard keeps the caller's relative row order and records the caller's row index of
    each of its rows in `extra_info["_dp_original_indices"]` (a tuple of ints).

    Raises:
        DataIntegrityError: when `len(meta)` is not a multiple of `dp`.
    """
    assignment = assign_balanced(meta.sequence_lengths, dp)
    return [
        meta.subset(rows).with_extra_info(**{ORIGINAL_INDICES: tuple(rows)}) for rows in assignment
    ]
