"""The data plane: batch containers, key-value receipts, stores, sharding and DP dispatch.

Legacy path: the driver holds a `BatchedDataDict`. TQ path: bulk tensors live in a store
(`DataPlaneClient`: in-memory or TransferQueue, built by `make_client`) and the driver holds a
`KVBatchMeta` receipt; `dp_dispatch` shards receipts over DP ranks with
`shard_keys_by_seqlen` and restores the caller's row order. See docs/data-plane.md.
"""

from rl.data.batched import BatchedDataDict
from rl.data.client import DataPlaneClient, MissingDataError, make_client
from rl.data.dispatch import dp_dispatch, flops_post_train
from rl.data.errors import DataIntegrityError
from rl.data.kv_meta import KVBatchMeta, make_key
from rl.data.memory_store import MemoryStore
from rl.data.sharding import shard_keys_by_seqlen

__all__ = [
    "BatchedDataDict",
    "DataIntegrityError",
    "DataPlaneClient",
    "KVBatchMeta",
    "MemoryStore",
    "MissingDataError",
    "dp_dispatch",
    "flops_post_train",
    "make_client",
    "make_key",
    "shard_keys_by_seqlen",
]
