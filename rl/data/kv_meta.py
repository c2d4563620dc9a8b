"""`KVBatchMeta`: the driver's receipt for a batch whose bulk tensors live in a key-value store.

On the TQ path the driver never holds token tensors. It holds one of these: which partition,
one key per row (minted once at rollout as `f"{uid}_g{i}"` and never re-minted), which fields
have been written, each row's unpadded sequence length (for sharding and FLOPs), one tag dict
per row (filter without fetching) and a batch-level `extra_info` bag.

Every transform is pure: it returns a new meta and shares no mutable state with the old one.
Row transforms (`subset`, `slice`, `concat`) drop `extra_info` keys that are row-aligned to a
parent batch (`ROW_ALIGNED_EXTRA`), since those would silently point at the wrong rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KVBatchMeta", "ROW_ALIGNED_EXTRA", "make_key"]

# extra_info keys whose values have one entry per row of some parent batch.
ROW_ALIGNED_EXTRA = frozenset({"_dp_original_indices"})


def make_key(uid: str, generation: int) -> str:
    """The per-row key minted at rollout: prompt uid plus generation index."""
    return f"{uid}_g{generation}"


def _same(a: Any, b: Any) -> bool:
    """Value equality; objects without a clean `==` (tensors) are equal only if identical."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):
        return False


@dataclass(frozen=True, kw_only=True)
class KVBatchMeta:
    """A batch receipt: `keys[i]`, `sequence_lengths[i]` and `tags[i]` describe row i.

    Args:
        partition_id: the store partition holding every row.
        keys: one unique key per row.
        fields: the column names written for these rows (order kept, no duplicates).
        sequence_lengths: unpadded token count per row (prompt + response), >= 0.
        tags: one dict per row; None means an empty dict for every row.
        extra_info: batch-level values.

    Raises:
        ValueError: naming the field whose length, type or contents is wrong.
    """

    partition_id: str
    keys: tuple[str, ...]
    sequence_lengths: tuple[int, ...]
    fields: tuple[str, ...] = ()
    tags: tuple[dict[str, Any], ...] | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        keys = tuple(self.keys)
        lengths = tuple(self.sequence_lengths)
        fields = tuple(self.fields)
        tags = tuple({} for _ in keys) if self.tags is None else tuple(dict(t) for t in self.tags)
        if not isinstance(self.partition_id, str) or not self.partition_id:
            raise ValueError(
                f"KVBatchMeta.partition_id must be a non-empty str, got {self.partition_id!r}"
            )
        if not all(isinstance(k, str) for k in keys):
            raise ValueError("KVBatchMeta.keys must all be str")
        if len(set(keys)) != len(keys):
            dupes = sorted({k for k in keys if keys.count(k) > 1})[:5]
            raise ValueError(f"KVBatchMeta.keys must be unique; duplicated: {dupes}")
        if len(lengths) != len(keys):
            raise ValueError(
                f"KVBatchMeta.sequence_lengths has {len(lengths)} entries for {len(keys)} keys"
            )
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in lengths):
            raise ValueError("KVBatchMeta.sequence_lengths must be non-negative ints")
        if len(tags) != len(keys):
            raise ValueError(f"KVBatchMeta.tags has {len(tags)} entries for {len(keys)} keys")
        if len(set(fields)) != len(fields) or not all(isinstance(f, str) for f in fields):
            raise ValueError(f"KVBatchMeta.fields must be unique str names, got {fields}")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "sequence_lengths", lengths)
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "extra_info", dict(self.extra_info))

    # --- views -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def size(self) -> int:
        """Number of rows."""
        return len(self.keys)

    @property
    def total_tokens(self) -> int:
        """Sum of the unpadded sequence lengths."""
        return sum(self.sequence_lengths)

    # --- pure transforms -------------------------------------------------------------------

    def _batch_extra(self) -> dict[str, Any]:
        return {k: v for k, v in self.extra_info.items() if k not in ROW_ALIGNED_EXTRA}

    def subset(self, indices: Iterable[int]) -> KVBatchMeta:
        """Rows `indices` in that order (each at most once; negative indices count from the end)."""
        idx = [int(i) for i in indices]
        n = len(self.keys)
        for i in idx:
            if not -n <= i < n:
                raise ValueError(f"KVBatchMeta.subset: index {i} out of range for {n} rows")
        return dataclasses.replace(
            self,
            keys=tuple(self.keys[i] for i in idx),
            sequence_lengths=tuple(self.sequence_lengths[i] for i in idx),
            tags=tuple(self.tags[i] for i in idx),
            extra_info=self._batch_extra(),
        )

    def slice(self, start: int, end: int) -> KVBatchMeta:
        """Rows `[start, end)`, like Python slicing."""
        return self.subset(range(len(self.keys))[start:end])

    @staticmethod
    def concat(*metas: KVBatchMeta) -> KVBatchMeta:
        """Rows of all `metas` in order. All must share one partition.

        `fields` keeps only fields present in every input (a read must be valid for all rows);
        `extra_info` keeps batch-level keys, and a key set to different values is an error.
        """
        if len(metas) == 1 and not isinstance(metas[0], KVBatchMeta):
            metas = tuple(metas[0])  # concat([a, b]) as well as concat(a, b)
        if not metas:
            raise ValueError("KVBatchMeta.concat needs at least one meta")
        partitions = sorted({m.partition_id for m in metas})
        if len(partitions) != 1:
            raise ValueError(
                f"KVBatchMeta.concat: metas come from different partitions {partitions}"
            )
        fields = tuple(f for f in metas[0].fields if all(f in m.fields for m in metas[1:]))
        extra: dict[str, Any] = {}
        for m in metas:
            for key, value in m._batch_extra().items():
                if key in extra and not _same(extra[key], value):
                    raise ValueError(
                        f"KVBatchMeta.concat: extra_info[{key!r}] differs between metas"
                    )
                extra.setdefault(key, value)
        return KVBatchMeta(
            partition_id=partitions[0],
            keys=tuple(k for m in metas for k in m.keys),
            sequence_lengths=tuple(n for m in metas for n in m.sequence_lengths),
            fields=fields,
            tags=tuple(t for m in metas for t in m.tags),
            extra_info=extra,
        )

    def stamp_tags(self, values: Mapping[str, Sequence[Any]]) -> KVBatchMeta:
        """Set tag `name` of row i to `values[name][i]` for every name; other tags are kept."""
        n = len(self.keys)
        for name, column in values.items():
            if len(column) != n:
                raise ValueError(
                    f"KVBatchMeta.stamp_tags: tag {name!r} has {len(column)} values for {n} rows"
                )
        tags = tuple(
            {**tag, **{name: column[i] for name, column in values.items()}}
            for i, tag in enumerate(self.tags)
        )
        return dataclasses.replace(self, tags=tags)

    def with_fields(self, *names: str) -> KVBatchMeta:
        """The same rows with `names` added to `fields` (existing order kept, no duplicates)."""
        new = tuple(n for n in dict.fromkeys(names) if n not in self.fields)
        return dataclasses.replace(self, fields=self.fields + new)

    def with_extra_info(self, **values: Any) -> KVBatchMeta:
        """The same rows with `extra_info` updated by `values`."""
        return dataclasses.replace(self, extra_info={**self.extra_info, **values})

    def filter_tags(self, predicate: Any) -> KVBatchMeta:
        """Rows whose tag dict satisfies `predicate(tags) -> bool`, in order (no fetch)."""
        return self.subset(i for i, tag in enumerate(self.tags) if predicate(tag))
