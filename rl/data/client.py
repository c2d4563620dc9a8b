"""`DataPlaneClient`: put / get / clear columns by per-row key, whatever the store behind it.

The contract every backend keeps (and `tests/rl/test_data_client.py` checks on each):

* `put(meta_or_keys, partition, columns)` writes one value per row for each column and
  returns the receipt (`KVBatchMeta`) with the written fields added. Putting a key again
  overwrites the fields it names and keeps the others.
* `get(meta, fields)` reads exactly the named fields, rows in `meta.keys` order. A key or a
  field that is not stored is a `MissingDataError` naming it; nothing is silently dropped.
* Values are copied on the way in and out (CPU tensors): mutating what you put or got never
  changes the store.

Column layout, the same for every backend (`split_rows` on put, `stack_rows` on get):

* A tensor column `[B, ...]` is stored as B rows `[...]`. Read back, rows of one shape are
  stacked, so a padded `[B, T]` column round-trips bit-exactly.
* A list column holds one entry per row. Tensor rows may differ in their first dim (unpadded
  token rows): read back they are right-padded with zeros (False for bool) to the longest
  row among the rows read; the true lengths are the caller's (`meta.sequence_lengths` or a
  length column). Non-tensor rows (str, numbers, dicts) come back as a list.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta

__all__ = [
    "Column",
    "DataPlaneClient",
    "MissingDataError",
    "check_column",
    "split_rows",
    "stack_rows",
]

Column = torch.Tensor | list


class MissingDataError(KeyError):
    """A requested key or field is not in the store. The message names it."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


def check_column(name: str, column: Column, rows: int) -> Column:
    """`column` checked to hold one value per row; a tensor comes back detached, on the CPU."""
    if isinstance(column, torch.Tensor):
        if column.ndim == 0 or column.shape[0] != rows:
            shape = tuple(column.shape)
            raise ValueError(f"column {name!r} has shape {shape}; expected dim 0 == {rows} rows")
        return column.detach().to("cpu")
    if not isinstance(column, (list, tuple)):
        raise ValueError(f"column {name!r} must be a tensor or a list, got {type(column).__name__}")
    if len(column) != rows:
        raise ValueError(f"column {name!r} has {len(column)} entries for {rows} rows")
    return list(column)


def split_rows(name: str, column: Column, rows: int) -> list[Any]:
    """One CPU value per row of `column`, copied (so the caller may reuse its buffers)."""
    column = check_column(name, column, rows)
    if isinstance(column, torch.Tensor):
        return list(column.clone().unbind(0))
    return [
        v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else copy.deepcopy(v)
        for v in column
    ]


def stack_rows(name: str, rows: Sequence[Any]) -> Column:
    """Rebuild a column from row values (see the module docstring for the exact rule)."""
    if not rows or not all(isinstance(r, torch.Tensor) for r in rows):
        return [copy.deepcopy(r) for r in rows]
    shapes = {tuple(r.shape) for r in rows}
    dtypes = {r.dtype for r in rows}
    if len(dtypes) != 1:
        raise DataIntegrityError(f"column {name!r} has rows of several dtypes {sorted(map(str, dtypes))}")
    if len(shapes) == 1:
        return torch.stack(list(rows))
    tails = {s[1:] for s in shapes}
    if not (all(len(s) >= 1 for s in shapes) and len(tails) == 1):
        raise DataIntegrityError(
            f"column {name!r} has rows of shapes {sorted(shapes)}; only dim 0 may differ")
    width = max(s[0] for s in shapes)
    out = torch.zeros((len(rows), width, *next(iter(tails))), dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


def _field_list(fields: Sequence[str] | str) -> list[str]:
    names = [fields] if isinstance(fields, str) else list(fields)
    if not names:
        raise ValueError("get: `fields` must name at least one field (reads always name fields)")
    if not all(isinstance(f, str) for f in names) or len(set(names)) != len(names):
        raise ValueError(f"get: `fields` must be unique str names, got {names}")
    return names


class DataPlaneClient(abc.ABC):
    """Store columns by (partition, key); subclasses implement the four `_` primitives."""

    backend: str = "abstract"

    # --- backend primitives ---------------------------------------------------------------

    @abc.abstractmethod
    def _write(
        self, partition: str, keys: list[str], columns: dict[str, Column], tags: list[dict] | None
    ) -> None:
        """Store row i of each checked column (see `check_column`) under `keys[i]`, copied."""

    @abc.abstractmethod
    def _read(self, partition: str, keys: list[str], fields: list[str]) -> dict[str, list[Any]]:
        """Row values per field, in `keys` order; MissingDataError naming what is absent."""

    @abc.abstractmethod
    def _delete(self, partition: str, keys: list[str] | None) -> None:
        """Drop `keys` (None: every key) of `partition`; absent keys are ignored."""

    @abc.abstractmethod
    def partitions(self) -> dict[str, int]:
        """Number of stored keys per non-empty partition."""

    @abc.abstractmethod
    def tags(self, partition: str) -> dict[str, dict[str, Any]]:
        """Stored tags per key of `partition` (those given to `put` with new keys)."""

    def close(self) -> None:  # noqa: B027  (a no-op unless the backend holds resources)
        """Release this client's resources (the owner also shuts the store down)."""

    # --- public API -----------------------------------------------------------------------

    def put(
        self,
        target: KVBatchMeta | Sequence[str],
        partition: str | None = None,
        columns: Mapping[str, Column] | None = None,
        *,
        sequence_lengths: Sequence[int] | None = None,
        tags: Sequence[dict[str, Any]] | None = None,
    ) -> KVBatchMeta:
        """Write `columns` for the rows of `target`; return the receipt with the fields added.

        Args:
            target: a receipt (its partition and keys are used) or the keys of new rows.
            partition: required with keys; with a receipt it may be omitted or must match.
            columns: field name -> tensor `[B, ...]` or list of B values.
            sequence_lengths: unpadded length per row; required when `target` is keys.
            tags: one dict per row, only when `target` is keys.
        """
        if not columns:
            raise ValueError("put: `columns` must hold at least one field")
        if isinstance(target, KVBatchMeta):
            if partition is not None and partition != target.partition_id:
                raise ValueError(
                    f"put: partition {partition!r} differs from the meta's {target.partition_id!r}"
                )
            if sequence_lengths is not None or tags is not None:
                raise ValueError("put: pass sequence_lengths/tags only with new keys, not a meta")
            meta = target
        else:
            if isinstance(target, str):
                raise ValueError("put: `target` must be a KVBatchMeta or a list of keys, not a str")
            if partition is None:
                raise ValueError("put: `partition` is required when putting by keys")
            if sequence_lengths is None:
                raise ValueError("put: `sequence_lengths` is required when putting by keys")
            meta = KVBatchMeta(
                partition_id=partition,
                keys=tuple(target),
                sequence_lengths=tuple(int(n) for n in sequence_lengths),
                tags=None if tags is None else tuple(tags),
            )
        if len(meta) == 0:
            return meta.with_fields(*columns)
        checked = {name: check_column(name, col, len(meta)) for name, col in columns.items()}
        new_tags = None if isinstance(target, KVBatchMeta) or tags is None else list(meta.tags)
        self._write(meta.partition_id, list(meta.keys), checked, new_tags)
        return meta.with_fields(*columns)

    def get(self, meta: KVBatchMeta, fields: Sequence[str] | str) -> dict[str, Column]:
        """The named fields of `meta`'s rows, in `meta.keys` order (layout: module docstring).

        Raises:
            MissingDataError: naming the partition, key or field that is not stored.
        """
        names = _field_list(fields)
        if len(meta) == 0:
            raise ValueError("get: the meta has no rows")
        rows = self._read(meta.partition_id, list(meta.keys), names)
        return {name: stack_rows(name, rows[name]) for name in names}

    def clear(self, target: str | KVBatchMeta, keys: Sequence[str] | None = None) -> None:
        """Drop a whole partition (`clear("p")`), some of its keys, or a receipt's rows."""
        if isinstance(target, KVBatchMeta):
            if keys is not None:
                raise ValueError("clear: pass keys only with a partition name")
            self._delete(target.partition_id, list(target.keys))
        else:
            self._delete(target, None if keys is None else list(keys))

    def __enter__(self) -> DataPlaneClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def missing_message(partition: str, what: str, names: Sequence[str], total: int) -> str:
    """A uniform message for a missing key or field (first few names shown)."""
    shown = ", ".join(repr(n) for n in list(names)[:5])
    more = f" (+{len(names) - 5} more)" if len(names) > 5 else ""
    return f"partition {partition!r}: {what} not stored: {shown}{more} (of {total} requested)"
