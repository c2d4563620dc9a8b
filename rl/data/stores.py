"""The data-plane store each `data_plane.backend` names, built from the recipe's section.

Apart from rl/data/client.py, which states the contract the stores keep: the stores import the
contract, and only this module imports the stores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rl.data.client import DataPlaneClient
from rl.data.memory_store import MemoryStore
from rl.data.tq_store import TQStore, tq_conf

__all__ = ["BACKENDS", "make_client"]


def _build_memory(section: Mapping[str, Any]) -> DataPlaneClient:
    return MemoryStore()


def _build_tq(section: Mapping[str, Any]) -> DataPlaneClient:
    tq = dict(section.get("tq") or {})
    unknown = sorted(set(tq) - {"num_storage_units", "total_storage_size"})
    if unknown:
        raise ValueError(
            f"data_plane.tq: unknown keys {unknown}; valid: num_storage_units, total_storage_size"
        )
    return TQStore.start(tq_conf(**tq))


# `legacy` runs the BatchedDataDict path; a client it asks for is the in-process store.
BACKENDS = {"legacy": _build_memory, "memory": _build_memory, "tq": _build_tq}


def make_client(cfg: Mapping[str, Any] | Any) -> DataPlaneClient:
    """The data-plane client named by the recipe's `data_plane` section.

    Args:
        cfg: `{"backend": "legacy" | "memory" | "tq", "tq": {"num_storage_units": 1}}`, or a
            dataclass with those attributes. `tq` needs an initialized Ray and starts the
            TransferQueue system (about 13 s); workers get theirs by unpickling the result.

    Raises:
        ValueError: naming `data_plane.backend` when the backend is unknown.
    """
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = dataclasses.asdict(cfg)
    backend = cfg.get("backend", "legacy")
    if backend not in BACKENDS:
        raise ValueError(
            f"data_plane.backend: unknown backend {backend!r}; valid: {sorted(BACKENDS)}"
        )
    return BACKENDS[backend](cfg)
