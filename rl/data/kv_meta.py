"""`KVBatchMeta`: the driver's receipt for a batch whose bulk tensors live in a key-value store.

On the TQ path the driver never holds token tensors. It holds one of these: which partition,
one key per row (minted once at rollout as `f"{uid}_g{i}"` and never re-minted), which fields
have been written, each row's unpadded sequence length (for sharding and FLOPs), one tag dict
per row (small values that travel with the receipt: a teacher's lengths) and a batch-level
`extra_info` bag.

Every transform is pure: it returns a new meta and shares no mutable state with the old one.
Row transforms (`subset`, `slice`, `concat`) drop `extra_info` keys that are row-aligned to a
parent batch (`ROW_ALIGNED_EXTRA`), since those would silently point at the wrong rows.

Validate once: the constructor checks every row; a transform of a meta that passed it checks
only what the transform itself could break (an index out of range or given twice, a key on two
metas of a concat, a field name that is not a str) and builds the result with `_trusted`, which
skips the per-row re-checks. A meta built by a transform is equal to one built by the
constructor from the same parts (tests/rl/test_data_kv_meta.py checks it on random transforms).
At 16k rows over DP 64 the re-checks were most of the driver's dispatch time (issue 15).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
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


def _duplicated_keys_message(keys: Sequence[str]) -> str:
    dupes = sorted(k for k, c in Counter(keys).items() if c > 1)[:5]
    return f"KVBatchMeta.keys must be unique; duplicated: {dupes}"


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
            raise ValueError(_duplicated_keys_message(keys))
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

    @classmethod
    def _trusted(
        cls,
        *,
        partition_id: str,
        keys: tuple[str, ...],
        sequence_lengths: tuple[int, ...],
        fields: tuple[str, ...],
        tags: tuple[dict[str, Any], ...],
        extra_info: dict[str, Any],
    ) -> KVBatchMeta:
        """A meta from parts a transform derived from validated metas; no per-row re-checks.

        The caller guarantees what `__post_init__` would check (tuples of equal length, unique
        str keys, non-negative int lengths, unique str fields) and hands over fresh `tags`
        dicts and a fresh `extra_info` dict, so the result shares no mutable state.
        """
        meta = object.__new__(cls)
        object.__setattr__(meta, "partition_id", partition_id)
        object.__setattr__(meta, "keys", keys)
        object.__setattr__(meta, "sequence_lengths", sequence_lengths)
        object.__setattr__(meta, "fields", fields)
        object.__setattr__(meta, "tags", tags)
        object.__setattr__(meta, "extra_info", extra_info)
        return meta

    def _same_rows(self, **changes: Any) -> KVBatchMeta:
        """These rows with fresh tag dicts; `changes` replaces fields/tags/extra_info."""
        parts = {
            "partition_id": self.partition_id,
            "keys": self.keys,
            "sequence_lengths": self.sequence_lengths,
            "fields": self.fields,
            "tags": None,
            "extra_info": None,
        }
        parts.update(changes)
        if parts["tags"] is None:
            parts["tags"] = tuple([t.copy() for t in self.tags])
        if parts["extra_info"] is None:
            parts["extra_info"] = dict(self.extra_info)
        return KVBatchMeta._trusted(**parts)

    def _rows(self, idx: Sequence[int], extra_info: dict[str, Any]) -> KVBatchMeta:
        """Rows `idx` (non-negative, in range, each once: the caller checked) with `extra_info`."""
        if len(idx) > 1:
            pick = itemgetter(*idx)  # a tuple of the picked items, at C speed
            keys, lengths, tags = pick(self.keys), pick(self.sequence_lengths), pick(self.tags)
        else:
            keys = tuple([self.keys[i] for i in idx])
            lengths = tuple([self.sequence_lengths[i] for i in idx])
            tags = tuple([self.tags[i] for i in idx])
        return KVBatchMeta._trusted(
            partition_id=self.partition_id,
            keys=keys,
            sequence_lengths=lengths,
            fields=self.fields,
            tags=tuple([t.copy() for t in tags]),
            extra_info=extra_info,
        )

    # --- views -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def size(self) -> int:
        """Number of rows."""
        return len(self.keys)

    # --- pure transforms -------------------------------------------------------------------

    def _batch_extra(self) -> dict[str, Any]:
        return {k: v for k, v in self.extra_info.items() if k not in ROW_ALIGNED_EXTRA}

    def subset(self, indices: Iterable[int]) -> KVBatchMeta:
        """Rows `indices` in that order (each at most once; negative indices count from the end).

        Raises:
            ValueError: an index out of range, or one given twice (its key would repeat).
        """
        idx = [int(i) for i in indices]
        n = len(self.keys)
        if idx and not (-n <= min(idx) and max(idx) < n):
            bad = next(i for i in idx if not -n <= i < n)
            raise ValueError(f"KVBatchMeta.subset: index {bad} out of range for {n} rows")
        if idx and min(idx) < 0:
            idx = [i + n if i < 0 else i for i in idx]
        if len(set(idx)) != len(idx):
            raise ValueError(_duplicated_keys_message([self.keys[i] for i in idx]))
        return self._rows(idx, self._batch_extra())

    def slice(self, start: int, end: int) -> KVBatchMeta:
        """Rows `[start, end)`, like Python slicing."""
        rows = range(len(self.keys))[start:end]
        return KVBatchMeta._trusted(
            partition_id=self.partition_id,
            keys=self.keys[rows.start : rows.stop],
            sequence_lengths=self.sequence_lengths[rows.start : rows.stop],
            fields=self.fields,
            tags=tuple([t.copy() for t in self.tags[rows.start : rows.stop]]),
            extra_info=self._batch_extra(),
        )

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
        keys = tuple(chain.from_iterable(m.keys for m in metas))
        if len(set(keys)) != len(keys):
            raise ValueError(_duplicated_keys_message(keys))
        return KVBatchMeta._trusted(
            partition_id=partitions[0],
            keys=keys,
            sequence_lengths=tuple(chain.from_iterable(m.sequence_lengths for m in metas)),
            fields=fields,
            tags=tuple([t.copy() for m in metas for t in m.tags]),
            extra_info=extra,
        )

    def with_fields(self, *names: str) -> KVBatchMeta:
        """The same rows with `names` added to `fields` (existing order kept, no duplicates).

        Raises:
            ValueError: a name that is not a str.
        """
        if not all(isinstance(n, str) for n in names):
            raise ValueError(f"KVBatchMeta.fields must be unique str names, got {names}")
        new = tuple(n for n in dict.fromkeys(names) if n not in self.fields)
        return self._same_rows(fields=self.fields + new)
