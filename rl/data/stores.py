"""The data-plane store each `data_plane.backend` names, built from the recipe's section.

Apart from rl/data/client.py, which states the contract the stores keep: the stores import the
contract, and only this module imports the stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rl.data.client import DataPlaneClient
from rl.data.memory_store import MemoryStore
from rl.data.tq_store import TQStore, tq_conf

if TYPE_CHECKING:
    from rl.config import DataPlaneConfig

__all__ = ["BACKENDS", "make_client"]


def _build_memory(section: DataPlaneConfig) -> DataPlaneClient:
    return MemoryStore()


def _build_tq(section: DataPlaneConfig) -> DataPlaneClient:
    return TQStore.start(tq_conf(num_storage_units=section.tq.num_storage_units))


# `legacy` runs the BatchedDataDict path; a client it asks for is the in-process store.
BACKENDS: dict[str, Callable[[DataPlaneConfig], DataPlaneClient]] = {"legacy": _build_memory, "tq": _build_tq}


def make_client(section: DataPlaneConfig) -> DataPlaneClient:
    """The data-plane client named by the recipe's `data_plane` section (its keys and values
    checked when the section was built). `tq` needs an initialized Ray and starts the
    TransferQueue system (about 13 s); workers get theirs by unpickling the result."""
    return BACKENDS[section.backend](section)
