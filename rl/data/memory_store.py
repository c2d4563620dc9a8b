"""The in-process data-plane backend: a dict of partitions of keys of row values.

Used by unit tests and by a single-process engine. It keeps exactly the semantics of the
TransferQueue backend (copy in, copy out, same column layout, same errors), so a test written
against it says something true about the real store. It cannot be shared with Ray workers:
pickling it is an error rather than a silent private copy.
"""

from __future__ import annotations

import threading
from typing import Any

from rl.data.client import Column, DataPlaneClient, MissingDataError, missing_message, split_rows

__all__ = ["MemoryStore"]


class MemoryStore(DataPlaneClient):
    """`{partition: {key: {"fields": {name: row value}, "tags": dict}}}` behind a lock."""

    backend = "memory"

    def __init__(self) -> None:
        self._data: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("MemoryStore is closed")

    def _write(
        self, partition: str, keys: list[str], columns: dict[str, Column], tags: list[dict] | None
    ) -> None:
        self._check_open()
        rows = {name: split_rows(name, col, len(keys)) for name, col in columns.items()}
        with self._lock:
            part = self._data.setdefault(partition, {})
            for i, key in enumerate(keys):
                entry = part.setdefault(key, {"fields": {}, "tags": {}})
                for name, values in rows.items():
                    entry["fields"][name] = values[i]
                if tags is not None:
                    entry["tags"] = dict(tags[i])

    def _read(self, partition: str, keys: list[str], fields: list[str]) -> dict[str, list[Any]]:
        self._check_open()
        with self._lock:
            part = self._data.get(partition)
            if part is None:
                raise MissingDataError(
                    f"partition {partition!r} not stored (reading {len(keys)} keys)"
                )
            absent = [k for k in keys if k not in part]
            if absent:
                raise MissingDataError(missing_message(partition, "keys", absent, len(keys)))
            out: dict[str, list[Any]] = {}
            for name in fields:
                lacking = [k for k in keys if name not in part[k]["fields"]]
                if lacking:
                    raise MissingDataError(
                        missing_message(partition, f"field {name!r} for keys", lacking, len(keys))
                    )
                out[name] = [part[k]["fields"][name] for k in keys]
            return out

    def _delete(self, partition: str, keys: list[str] | None) -> None:
        self._check_open()
        with self._lock:
            part = self._data.get(partition)
            if part is None:
                return
            if keys is None:
                part.clear()
            for key in keys or ():
                part.pop(key, None)
            if not part:
                del self._data[partition]

    def partitions(self) -> dict[str, int]:
        self._check_open()
        with self._lock:
            return {name: len(part) for name, part in self._data.items() if part}

    def tags(self, partition: str) -> dict[str, dict[str, Any]]:
        """Stored tags per key of `partition` (what TransferQueue's `kv_list` shows)."""
        with self._lock:
            return {k: dict(v["tags"]) for k, v in self._data.get(partition, {}).items()}

    def close(self) -> None:
        with self._lock:
            self._data.clear()
        self._closed = True

    def __reduce__(self) -> Any:
        raise TypeError(
            "MemoryStore lives in one process and cannot be sent to Ray workers; "
            "use data_plane.backend 'tq' for a store shared with workers"
        )
