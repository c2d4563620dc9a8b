"""The sharder before issue 15, kept for comparison in bench/bench_shard_balance.py only.

Round greedy plus an unbounded refinement that scans every lighter rank for the best swap:
excellent balance, but 12.7 s for 16,384 rows over DP 256 on the 2-core box. Do not import it
from rl/: `rl.data.sharding.assign_balanced` replaced it with the same bound.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


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


def assign_balanced_previous(lengths: Sequence[int], dp: int) -> list[list[int]]:
    """The previous `assign_balanced` (budget 4n swaps per candidate); dp must divide n."""
    n = len(lengths)
    budget = 4 * n
    candidates = [
        _refine(_round_greedy(lengths, dp), lengths, budget),
        _refine(assign_stride(lengths, dp), lengths, budget),
    ]
    best = min(candidates, key=lambda ranks: _quality(ranks, lengths))
    return [sorted(r) for r in best]
