"""`dp_dispatch`: run a policy method over DP ranks from a receipt and give rows back in order.

The protocol between the decorator and the driver-side policy group (the engine supplies it):

* `self.dp_size: int` - the number of DP ranks.
* `self._run_on_ranks(method_name, per_rank_inputs, *args, **kwargs) -> list` - rank r runs
  `worker.<method_name>(per_rank_inputs[r], *args, **kwargs)`; results in rank order.
* optional `self._dp_post_<method>(aggregated, raw_results, *, shards)` - called after
  aggregation; a non-None return value replaces the aggregated result.
* optional `self._record_invariant(record: dict)` - receives one `dispatch_row_order` record
  per row-shaped meta-path dispatch (docs/architecture.md; the engine adds `step`).

Input kinds, each registered with `_plan` (functools.singledispatch), so the decorator body
never asks which data path it is on: a `BatchedDataDict` runs the undecorated body untouched
(legacy path). One `KVBatchMeta` is sharded by `shard_keys_by_seqlen`, fanned out, and
row-shaped results are put back in the caller's `meta.keys` order. A `list[KVBatchMeta]` (one
per rank) is fanned out as given and results are concatenated in rank order, never reordered;
a key given twice (on two ranks or within one meta) is refused before any worker runs.

Row-shaped results carry their keys; `row_kind` (registered per type the same way) says how
each kind is keyed, concatenated and reordered (`RowKind`): a `KVBatchMeta` (`MetaRows`: the
worker wrote columns to the store), or a mapping with a `"keys"` list plus row columns
(`ColumnRows`: tensors/lists, one entry per key). Other results (train's metrics dict) are not
row-shaped: the aggregate is rank 0's result, and the post hook sees every rank's.

Restoring order: shard-concatenated row j is the caller's row `order[j]`, so the output is
`out[order[j]] = concat[j]`, i.e. gather with the inverse of `order`. Gathering with `order`
itself (the published bug) is right only when `order` is its own inverse. The result is then
checked by key, independently of the permutation arithmetic.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rl import faults
from rl.data.batched import BatchedDataDict
from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta
from rl.data.sharding import ORIGINAL_INDICES, shard_keys_by_seqlen

__all__ = ["ROW_KEYS", "ColumnRows", "MetaRows", "RowKind", "caller_order_gather", "dp_dispatch", "flops_post_train",
           "original_lengths", "row_kind"]

ROW_KEYS = "keys"
INVARIANT = "dispatch_row_order"


def caller_order_gather(order: Sequence[int]) -> list[int]:
    """Gather indices that put shard-concatenated rows back in caller order.

    `order[j]` is the caller's index of concatenated row j; returns `g` with
    `out[i] = concat[g[i]]`, the inverse permutation of `order`.
    """
    n = len(order)
    arr = np.asarray(order, dtype=np.int64).reshape(-1)
    if (
        len(arr) != n
        or (n and (arr.min() < 0 or arr.max() >= n))
        or np.bincount(arr, minlength=n).max(initial=0) > 1
    ):
        raise DataIntegrityError("shard indices are not a permutation")
    gather = np.empty(n, dtype=np.int64)
    gather[arr] = np.arange(n, dtype=np.int64)
    return gather.tolist()


class RowKind(abc.ABC):
    """How one kind of row-shaped rank result is keyed, joined in rank order and reordered."""

    name = "rows"

    @abc.abstractmethod
    def keys(self, result: Any) -> list[str]: ...

    @abc.abstractmethod
    def concat(self, raw: list[Any], method: str) -> Any: ...

    @abc.abstractmethod
    def take(self, rows: Any, gather: list[int], method: str) -> Any: ...


class MetaRows(RowKind):
    """Receipts: the worker wrote its columns to the store."""

    name = "KVBatchMeta"

    def keys(self, result: KVBatchMeta) -> list[str]:
        return list(result.keys)

    def concat(self, raw: list[KVBatchMeta], method: str) -> KVBatchMeta:
        return KVBatchMeta.concat(*raw)

    def take(self, rows: KVBatchMeta, gather: list[int], method: str) -> KVBatchMeta:
        if len(rows) != len(gather):
            raise DataIntegrityError(f"{method}: ranks returned {len(rows)} rows for {len(gather)} caller rows")
        # No per-index re-check: `gather` is a checked permutation, and _check_rows compares
        # the result's keys with the caller's whatever the index arithmetic did.
        return rows._rows(gather, rows._batch_extra())


class ColumnRows(RowKind):
    """A mapping with a `"keys"` list and row columns (tensors/lists); comes back as `container`."""

    def __init__(self, container: type) -> None:
        self.container = container
        self.name = container.__name__

    def keys(self, result: Mapping[str, Any]) -> list[str]:
        return list(result[ROW_KEYS])

    def concat(self, raw: list[Mapping[str, Any]], method: str) -> BatchedDataDict:
        """2-D tensors right-padded with 0."""
        for rank, result in enumerate(raw):
            rows = len(result[ROW_KEYS])
            for name, column in result.items():
                size = column.shape[0] if hasattr(column, "shape") else len(column)
                if size != rows:
                    raise DataIntegrityError(
                        f"{method}: rank {rank} result column {name!r} has {size} rows for {rows} keys")
        return BatchedDataDict.from_batches(list(raw))

    def take(self, rows: BatchedDataDict, gather: list[int], method: str) -> Any:
        if len(rows[ROW_KEYS]) != len(gather):
            raise DataIntegrityError(
                f"{method}: ranks returned {len(rows[ROW_KEYS])} rows for {len(gather)} caller rows")
        taken = rows.select_indices(gather)
        return taken if self.container is BatchedDataDict else self.container(taken)


@functools.singledispatch
def row_kind(result: Any) -> RowKind | None:
    """The kind of a rank's result, or None when it is not row-shaped (train's metrics dict)."""
    return None


@row_kind.register
def _(result: KVBatchMeta) -> RowKind:
    return MetaRows()


@row_kind.register
def _(result: BatchedDataDict) -> RowKind | None:
    return ColumnRows(BatchedDataDict) if ROW_KEYS in result else None


@row_kind.register
def _(result: Mapping) -> RowKind | None:
    return ColumnRows(dict) if ROW_KEYS in result else None


def _one_kind(kinds: list[RowKind], method: str) -> RowKind:
    """The kind every rank returned (rank 0's container for mappings); mixed kinds are refused."""
    if len({type(k) for k in kinds}) > 1:
        raise DataIntegrityError(f"{method}: ranks returned mixed row-shaped kinds {sorted({k.name for k in kinds})}")
    return kinds[0]


def _check_rows(self: Any, method: str, kind: RowKind, out: Any, expected: Sequence[str]) -> None:
    """Verify output keys == caller keys; report through `_record_invariant`; raise on mismatch."""
    got = kind.keys(out)
    expected = list(expected)
    ok = got == expected
    if ok:
        detail = f"{len(got)} rows in caller order"
    else:
        wrong = [i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b]
        first = wrong[0] if wrong else min(len(got), len(expected))
        detail = (
            f"{len(wrong)} of {len(expected)} rows out of place (got {len(got)} rows); first at "
            f"row {first}: expected {expected[first] if first < len(expected) else None!r}, "
            f"got {got[first] if first < len(got) else None!r}"
        )
    record = {
        "check": INVARIANT,
        "method": method,
        "ok": ok,
        "rows": len(expected),
        "detail": detail,
    }
    hook = getattr(self, "_record_invariant", None)
    if hook is not None:
        hook(record)
    if not ok:
        raise DataIntegrityError(f"dp_dispatch({method}): {detail}")


Plan = tuple[list[KVBatchMeta], list[int], list[str]]


def _dp_size(self: Any, method: str) -> int:
    dp = self.dp_size
    if not isinstance(dp, int) or dp <= 0:
        raise ValueError(f"dp_dispatch({method}): policy group dp_size must be a positive int, got {dp!r}")
    return dp


@functools.singledispatch
def _plan(data: Any, self: Any, method: str) -> Plan | None:
    """Shards, the caller index of each shard-concatenated row, and the caller's key order; None
    for a `BatchedDataDict` (legacy: the undecorated body runs)."""
    _dp_size(self, method)
    raise _not_a_batch(data, method)


def _not_a_batch(data: Any, method: str) -> TypeError:
    return TypeError(
        f"dp_dispatch({method}): expected BatchedDataDict, KVBatchMeta or list[KVBatchMeta] "
        f"(one per DP rank), got {type(data).__name__}"
    )


@_plan.register
def _(data: BatchedDataDict, self: Any, method: str) -> None:
    return None


@_plan.register
def _(data: KVBatchMeta, self: Any, method: str) -> Plan:
    """One receipt: sharded by sequence length, rows put back in the caller's order."""
    dp = _dp_size(self, method)
    _check_split(method, [data], dp)
    shards = shard_keys_by_seqlen(data, dp)
    order = [i for shard in shards for i in shard.extra_info[ORIGINAL_INDICES]]
    return shards, order, list(data.keys)


@_plan.register(list)
@_plan.register(tuple)
def _(data: Sequence[Any], self: Any, method: str) -> Plan:
    """One receipt per rank: fanned out as given, results in rank order."""
    dp = _dp_size(self, method)
    if not data or not all(isinstance(m, KVBatchMeta) for m in data):
        raise _not_a_batch(data, method)
    metas = list(data)
    if len(metas) != dp:
        raise ValueError(f"dp_dispatch({method}): got {len(metas)} metas for dp_size={dp}; pass one per rank")
    total = _check_split(method, metas, dp)
    return metas, list(range(total)), [k for m in metas for k in m.keys]  # the caller's keys


def _check_split(method: str, metas: Sequence[KVBatchMeta], dp: int) -> int:
    """The number of rows, checked to be unique keys that split evenly over the DP ranks."""
    _refuse_duplicate_keys(method, metas)
    total = sum(len(m) for m in metas)
    if total % dp != 0:
        raise DataIntegrityError(
            f"dp_dispatch({method}): {total} rows do not split evenly over dp_size={dp} "
            f"({total} % {dp} = {total % dp}); make the batch a multiple of the DP size"
        )
    return total


def _refuse_duplicate_keys(method: str, metas: Sequence[KVBatchMeta]) -> None:
    """Raise before any worker runs if a key is on two ranks (or twice in one meta).

    A key on two ranks would be processed twice, and an invariant built from those keys would
    expect it twice and record ok (issue 15).
    """
    every = [k for meta in metas for k in meta.keys]
    if len(set(every)) == len(every):
        return  # the common case: one set of every key; the rank map below only names dupes
    ranks_of: dict[str, list[int]] = {}
    for rank, meta in enumerate(metas):
        for key in meta.keys:
            ranks_of.setdefault(key, []).append(rank)
    dupes = {k: r for k, r in ranks_of.items() if len(r) > 1}
    if dupes:
        shown = ", ".join(f"{k!r} on ranks {r}" for k, r in list(dupes.items())[:5])
        raise DataIntegrityError(
            f"dp_dispatch({method}): {len(dupes)} key(s) given more than once, so their rows "
            f"would be processed twice: {shown}; give each row to exactly one rank"
        )


def dp_dispatch(method: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a policy-group method `method(self, data, *args, **kwargs)` (see the module doc)."""
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        plan = _plan(data, self, name)
        if plan is None:
            return method(self, data, *args, **kwargs)
        shards, order, expected = plan
        raw = list(self._run_on_ranks(name, shards, *args, **kwargs))
        if len(raw) != len(shards):
            raise DataIntegrityError(f"dp_dispatch({name}): {len(raw)} results for {len(shards)} ranks")
        kinds = [row_kind(r) for r in raw]
        if any(kinds) and not all(kinds):
            raise DataIntegrityError(f"dp_dispatch({name}): only some ranks returned rows")
        if all(kinds):
            kind = _one_kind(kinds, name)
            gather = list(order) if faults.active("dispatch_inverse_reorder") else caller_order_gather(order)
            aggregated = kind.take(kind.concat(raw, name), gather, f"dp_dispatch({name})")
            _check_rows(self, name, kind, aggregated, expected)
        else:
            aggregated = raw[0]
        post = getattr(self, f"_dp_post_{name}", None)
        if post is not None:
            replaced = post(aggregated, raw, shards=shards)
            aggregated = aggregated if replaced is None else replaced
        return aggregated

    wrapper.__dp_dispatch__ = True  # type: ignore[attr-defined]
    return wrapper


def original_lengths(shards: Sequence[KVBatchMeta]) -> list[int]:
    """Sequence lengths in the caller's row order, rebuilt from the shards.

    Shards from `shard_keys_by_seqlen` carry their caller indices; a driver-chosen list of
    metas has none, and its caller order is the rank order.
    """
    if not all(ORIGINAL_INDICES in s.extra_info for s in shards):
        return [n for s in shards for n in s.sequence_lengths]
    total = sum(len(s) for s in shards)
    lengths: list[int | None] = [None] * total
    for shard in shards:
        for i, n in zip(shard.extra_info[ORIGINAL_INDICES], shard.sequence_lengths, strict=True):
            lengths[i] = n
    if not all(n is not None for n in lengths):
        raise DataIntegrityError("shard indices do not cover the batch")
    return lengths  # type: ignore[return-value]


def flops_post_train(
    aggregated: Mapping[str, Any] | None,
    raw_results: Sequence[Any],
    shards: Sequence[KVBatchMeta],
    *,
    flops: Callable[[list[int]], Mapping[str, Any]],
) -> dict[str, Any]:
    """Train metrics plus the FLOPs fields `flops(lengths)` gives for the caller-order lengths.

    The legacy body computes those fields from the full batch; on the meta path the body does
    not run, so this recovers the caller-order lengths from the shards and hands them to the
    same callable (the policy group's; the data plane knows no model).
    """
    return {**(aggregated or {}), **flops(original_lengths(shards))}
