"""The TransferQueue data-plane backend (package `transferqueue`, module `transfer_queue`).

How the pieces connect (read from transfer_queue/interface.py, version 0.1.11):

* The driver calls `tq.init(conf)` once, inside an initialized Ray. It creates a named actor
  `TransferQueueController` (namespace `transfer_queue`) and the storage-unit actors, stores the
  merged config (with ZMQ addresses) in the controller, and builds a per-process ZMQ client.
* Any other process of the same Ray cluster (a policy worker actor) calls `tq.init()` with no
  config: it finds the named controller, fetches the config from it and builds its own client.
  If no controller exists, the same call would start a *new* system with the default config
  (two storage units, which hang on a 2-CPU cluster), so `attach()` first checks that the
  controller exists and fails with a clear message otherwise.
* Pickling a `TQStore` (passing it to an actor) sends no state: the copy attaches lazily on its
  first call. Only the store that `start`ed the system shuts it down on `close()`; `tq.close()`
  from a worker would kill the shared controller, so a worker's `close()` never calls it.

Layout: columns are written as a TensorDict with batch size B. TransferQueue returns any
column whose rows are not scalars as a jagged nested tensor and non-tensor columns as a
NonTensorStack. `_to_rows` unbinds both back into per-row values and `client.stack_rows`
rebuilds the column exactly as the in-memory backend does (see rl/data/client.py).

TransferQueue drops unknown keys and fields from a read with only a log warning (a read of
`[k0, missing]` returns one row). `_read` therefore checks the row count and the field set of
every answer and, if they are off, finds and names the missing keys or field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from rl.data.client import Column, DataPlaneClient, MissingDataError, missing_message, split_rows

__all__ = ["TQStore", "tq_conf"]

log = logging.getLogger(__name__)

CONTROLLER_NAME = "TransferQueueController"
CONTROLLER_NAMESPACE = "transfer_queue"


def tq_conf(*, num_storage_units: int = 1) -> dict:
    """The `tq.init` overrides we use: one storage unit by default (two hang on 2 CPUs)."""
    if num_storage_units < 1:
        raise ValueError(f"data_plane.tq.num_storage_units must be >= 1, got {num_storage_units}")
    simple = {"num_data_storage_units": num_storage_units, "total_storage_size": None}
    return {"backend": {"storage_backend": "SimpleStorage", "SimpleStorage": simple}}


def _to_column(name: str, rows: list[Any]) -> Any:
    """Row values -> one TensorDict entry: stacked, jagged nested, or a NonTensorStack."""
    from tensordict.tensorclass import NonTensorStack

    if not all(isinstance(r, torch.Tensor) for r in rows):
        return NonTensorStack(*rows)
    shapes = {tuple(r.shape) for r in rows}
    if len(shapes) == 1:
        return torch.stack(rows)
    if any(r.ndim == 0 for r in rows) or len({s[1:] for s in shapes}) != 1:
        raise ValueError(f"column {name!r}: rows of shapes {sorted(shapes)}; only dim 0 may differ")
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def _to_rows(value: Any) -> list[Any]:
    """One TransferQueue answer column -> per-row values."""
    if isinstance(value, torch.Tensor):
        return list(value.unbind(0))  # nested (jagged) and regular tensors alike
    if hasattr(value, "tolist"):
        return list(value.tolist())  # NonTensorStack
    raise TypeError(f"unexpected TransferQueue column type {type(value).__name__}")


class TQStore(DataPlaneClient):
    """A client of one TransferQueue system; build with `start` (driver) or `attach` (workers)."""

    backend = "tq"

    def __init__(self, *, owner: bool) -> None:
        self._owner = owner
        self._tq: Any = None
        self._closed = False

    @classmethod
    def start(cls, conf: Mapping[str, Any] | None = None) -> TQStore:
        """Start the TransferQueue system in the current (initialized) Ray cluster.

        Raises:
            RuntimeError: when Ray is not initialized or a system is already running.
        """
        import ray
        import transfer_queue as tq
        from omegaconf import OmegaConf

        if not ray.is_initialized():
            raise RuntimeError("TQStore.start: call ray.init(...) first; the store lives in Ray")
        if _controller_exists():
            raise RuntimeError(
                "TQStore.start: a TransferQueue system already runs in this Ray cluster; "
                "use TQStore.attach() to join it"
            )
        tq.init(OmegaConf.create(dict(conf or tq_conf())))
        store = cls(owner=True)
        store._tq = tq
        return store

    @classmethod
    def attach(cls) -> TQStore:
        """A client of the system already started in this Ray cluster (connects lazily)."""
        return cls(owner=False)

    def __reduce__(self) -> Any:
        return (TQStore.attach, ())

    @property
    def tq(self) -> Any:
        """The `transfer_queue` module with this process's client connected."""
        if self._closed:
            raise RuntimeError("TQStore is closed")
        if self._tq is None:
            import transfer_queue as tq

            if not _controller_exists():
                raise RuntimeError(
                    "TQStore.attach: no TransferQueue controller in this Ray cluster; "
                    "the driver must build the store (make_client) before workers use it"
                )
            tq.init()  # attaches: finds the named controller and reads its config
            self._tq = tq
        return self._tq

    # --- primitives ------------------------------------------------------------------------

    def _write(
        self, partition: str, keys: list[str], columns: dict[str, Column], tags: list[dict] | None
    ) -> None:
        """Tensor columns go as they are (TransferQueue serializes them to the storage actor, a
        copy); list columns become one stacked, jagged or non-tensor column."""
        from tensordict import TensorDict

        data = {
            name: col
            if isinstance(col, torch.Tensor)
            else _to_column(name, split_rows(name, col, len(keys)))
            for name, col in columns.items()
        }
        fields = TensorDict(data, batch_size=[len(keys)])
        self.tq.kv_batch_put(keys=keys, partition_id=partition, fields=fields, tags=tags)

    def _read(self, partition: str, keys: list[str], fields: list[str]) -> dict[str, list[Any]]:
        try:
            answer = self.tq.kv_batch_get(keys=keys, partition_id=partition, select_fields=fields)
        except ValueError as err:  # "keys or partition were not found!" / "not ready"
            self._raise_missing(partition, keys, fields, err)
        if answer.batch_size[0] != len(keys) or any(f not in answer.keys() for f in fields):
            self._raise_missing(partition, keys, fields, None)
        return {name: _to_rows(answer[name]) for name in fields}

    def _raise_missing(
        self, partition: str, keys: list[str], fields: list[str], cause: Exception | None
    ) -> None:
        """Find what is absent and raise a MissingDataError naming it (error path only)."""
        listing = self.tq.kv_list(partition_id=partition).get(partition, {})
        absent = [k for k in keys if k not in listing]
        if absent:
            raise MissingDataError(missing_message(partition, "keys", absent, len(keys))) from cause
        for name in fields:
            try:
                one = self.tq.kv_batch_get(keys=keys, partition_id=partition, select_fields=[name])
                complete = one.batch_size[0] == len(keys) and name in one.keys()
            except ValueError:
                complete = False
            if not complete:
                raise MissingDataError(
                    f"partition {partition!r}: field {name!r} not stored for some of the "
                    f"{len(keys)} requested keys"
                ) from cause
        raise AssertionError(
            f"TransferQueue read of {fields} failed with all keys and fields present"
        ) from cause

    def _delete(self, partition: str, keys: list[str] | None) -> None:
        if keys is None:
            keys = list(self.tq.kv_list(partition_id=partition).get(partition, {}))
        if keys:
            self.tq.kv_clear(keys=keys, partition_id=partition)

    def partitions(self) -> dict[str, int]:
        return {name: len(keys) for name, keys in self.tq.kv_list().items() if keys}

    def tags(self, partition: str) -> dict[str, dict[str, Any]]:
        """Stored tags per key of `partition`."""
        return dict(self.tq.kv_list(partition_id=partition).get(partition, {}))

    def close(self) -> None:
        """The owner shuts the whole system down; an attached client just stops using it."""
        if self._closed:
            return
        if self._owner and self._tq is not None:
            self._tq.close()
        self._closed = True


def _controller_exists() -> bool:
    import ray

    try:
        ray.get_actor(CONTROLLER_NAME, namespace=CONTROLLER_NAMESPACE)
    except ValueError:
        return False
    return True
