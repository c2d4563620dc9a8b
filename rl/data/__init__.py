"""The data plane: batch containers, key-value receipts, stores, backends, sharding, DP dispatch.

The backends (`DataPlane`, registered by name in `PLANES`, rl/data/plane.py): `legacy`, where
the driver holds a `BatchedDataDict`, and `tq`, where bulk tensors live in a store
(`DataPlaneClient`: in-memory or TransferQueue, built by `make_client`) and the driver holds a
`KVBatchMeta` receipt; `dp_dispatch` shards receipts over DP ranks with
`shard_keys_by_seqlen` and restores the caller's row order. See docs/data-plane.md.
"""

from rl.data.batched import BatchedDataDict
from rl.data.client import DataPlaneClient, MissingDataError
from rl.data.dispatch import dp_dispatch, flops_post_train
from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta, make_key
from rl.data.memory_store import MemoryStore
from rl.data.plane import PLANES, DataPlane, plane_class
from rl.data.sharding import shard_keys_by_seqlen
from rl.data.stores import make_client

__all__ = [
    "PLANES",
    "BatchedDataDict",
    "DataIntegrityError",
    "DataPlane",
    "DataPlaneClient",
    "KVBatchMeta",
    "MemoryStore",
    "MissingDataError",
    "dp_dispatch",
    "flops_post_train",
    "make_client",
    "make_key",
    "plane_class",
    "shard_keys_by_seqlen",
]
