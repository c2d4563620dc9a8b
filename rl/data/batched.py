"""`BatchedDataDict`: the legacy batch container, a dict of equal-length columns.

The driver of the legacy data path holds one of these and hands it to
`policy.train(batch)` / `policy.get_logprobs(batch)`. A column is either a torch tensor whose
dim 0 is the batch, or a plain list with one entry per row. Every method keeps that shape rule.

Sharding follows the reference: `shard_by_batch_size(shards, batch_size)` cuts the batch into
global batches of `batch_size` rows, and rank r gets the r-th contiguous block of EACH global
batch. `from_batches` concatenates per-rank results back (right-padding 2-D tensors), in rank
order; `shard_indices` says which original row each joined row is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl.data.errors import DataIntegrityError

Column = torch.Tensor | list

__all__ = ["BatchedDataDict", "shard_indices"]


def shard_indices(total: int, shards: int, batch_size: int | None = None) -> list[list[int]]:
    """Original row indices that each rank receives from `shard_by_batch_size`.

    Rank r gets rows `[g*bs + r*bs/shards, g*bs + (r+1)*bs/shards)` of every global batch g.
    """
    batch_size = total if batch_size is None else batch_size
    if batch_size <= 0 or shards <= 0:
        raise ValueError(f"batch_size ({batch_size}) and shards ({shards}) must be positive")
    if total % batch_size != 0:
        raise ValueError(
            f"shard_by_batch_size: total rows ({total}) must be a multiple of batch_size ({batch_size})"
        )
    if batch_size % shards != 0:
        raise ValueError(
            f"shard_by_batch_size: batch_size ({batch_size}) must be a multiple of shards ({shards})"
        )
    per_rank = batch_size // shards
    return [
        [g + r * per_rank + i for g in range(0, total, batch_size) for i in range(per_rank)]
        for r in range(shards)
    ]


def _rows(column: Column) -> int:
    return column.shape[0] if isinstance(column, torch.Tensor) else len(column)


def _take(column: Column, indices: Sequence[int]) -> Column:
    if isinstance(column, torch.Tensor):
        return column[torch.as_tensor(list(indices), dtype=torch.long, device=column.device)]
    return [column[i] for i in indices]


def _right_pad(tensor: torch.Tensor, width: int, value: Any) -> torch.Tensor:
    """Pads dim 1 of `tensor` on the right up to `width` with `value`."""
    missing = width - tensor.shape[1]
    if missing == 0:
        return tensor
    pad_shape = (tensor.shape[0], missing, *tensor.shape[2:])
    pad = torch.full(pad_shape, value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor, pad], dim=1)


class BatchedDataDict(dict):
    """A dict of columns that all have the same number of rows.

    Methods that build a batch (`select_indices`, `slice`, `repeat_interleave`, `to`,
    `shard_by_batch_size`, `from_batches`) return new objects and leave `self` untouched.
    """

    @property
    def size(self) -> int:
        """Number of rows; 0 for an empty dict. Asserts that all columns agree."""
        sizes = {key: _rows(col) for key, col in self.items()}
        if not sizes:
            return 0
        if len(set(sizes.values())) != 1:
            raise DataIntegrityError(f"BatchedDataDict columns differ in rows: {sizes}")
        return next(iter(sizes.values()))

    # --- row selection -------------------------------------------------------------------

    def select_indices(self, indices: Sequence[int] | torch.Tensor) -> BatchedDataDict:
        """Rows `indices`, in that order (duplicates allowed)."""
        if isinstance(indices, torch.Tensor):
            indices = indices.tolist()
        size = self.size
        for i in indices:
            if not (-size <= i < size):
                raise DataIntegrityError(f"select_indices: index {i} out of range for {size} rows")
        return type(self)({key: _take(col, indices) for key, col in self.items()})

    def slice(self, start: int, end: int) -> BatchedDataDict:
        """Rows `[start, end)`, like Python slicing."""
        return type(self)({key: col[start:end] for key, col in self.items()})

    def repeat_interleave(self, repeats: int) -> BatchedDataDict:
        """Each row repeated `repeats` times in a row: [a, b] -> [a, a, b, b] for 2."""
        if repeats <= 0:
            raise ValueError(f"repeat_interleave: repeats must be positive, got {repeats}")
        indices = [i for i in range(self.size) for _ in range(repeats)]
        return self.select_indices(indices)

    # --- sharding ------------------------------------------------------------------------

    def shard_by_batch_size(
        self, shards: int, batch_size: int | None = None
    ) -> list[BatchedDataDict]:
        """Split into `shards` batches; rank r gets a contiguous block of each global batch.

        Args:
            shards: number of data-parallel ranks.
            batch_size: rows per global batch; None means the whole batch is one global batch.

        Raises:
            ValueError: when the row count is not a multiple of `batch_size`, or `batch_size`
                is not a multiple of `shards`.
        """
        return [self.select_indices(rows) for rows in shard_indices(self.size, shards, batch_size)]

    @classmethod
    def from_batches(
        cls,
        batches: Sequence[Mapping[str, Column]],
        pad_value_dict: Mapping[str, Any] | None = None,
    ) -> BatchedDataDict:
        """Concatenate batches row-wise; 2-D+ tensors are right-padded along dim 1.

        Args:
            batches: batches with the same keys.
            pad_value_dict: pad value per column name; columns not named pad with 0.
        """
        if not batches:
            return cls()
        keys = list(batches[0].keys())
        for i, batch in enumerate(batches):
            if set(batch.keys()) != set(keys):
                raise DataIntegrityError(
                    f"from_batches: batch {i} has keys {sorted(batch.keys())}, expected {sorted(keys)}")
        pad_value_dict = pad_value_dict or {}
        out = cls()
        for key in keys:
            columns = [batch[key] for batch in batches]
            if all(isinstance(col, torch.Tensor) for col in columns):
                if columns[0].ndim >= 2:
                    width = max(col.shape[1] for col in columns)
                    pad = pad_value_dict.get(key, 0)
                    columns = [_right_pad(col, width, pad) for col in columns]
                out[key] = torch.cat(columns, dim=0)
            else:
                if any(isinstance(col, torch.Tensor) for col in columns):
                    raise DataIntegrityError(f"from_batches: column {key!r} mixes tensors and lists")
                out[key] = [row for col in columns for row in col]
        return out

    # --- devices -------------------------------------------------------------------------

    def to(self, device: str | torch.device) -> BatchedDataDict:
        """A new batch with every tensor column on `device`; list columns are shared."""
        return type(self)(
            {
                key: col.to(device) if isinstance(col, torch.Tensor) else col
                for key, col in self.items()
            }
        )
