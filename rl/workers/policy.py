"""The policy worker: one data-parallel rank (a Ray actor) that computes log-probs and trains.

It owns the rank's gloo/NCCL process group and, on the TQ path, its own data-plane client: a
`KVBatchMeta` in means "read these rows' fields from the plane", and computed columns are
written back under the same keys, so only receipts travel through the driver. A
`BatchedDataDict` in means the legacy path: the tensors came with the call.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

import torch
import torch.distributed as dist

from rl.algorithms.loss import LossConfig
from rl.backends import get_backend
from rl.data import BatchedDataDict, KVBatchMeta
from rl.workers.base import WorkerBase

__all__ = ["PolicyWorker"]

GLOO_TIMEOUT_S = 120
SEQ_FIELDS = ("input_ids", "attention_mask")


class PolicyWorker(WorkerBase):
    """One DP rank. Built bare (fast), then `setup` joins the process group and loads weights."""

    role = "policy"

    def __init__(self, *, name: str, rank: int, world_size: int, env_keys: list[str],
                 data_plane: Any = None) -> None:
        super().__init__(name=name, rank=rank, env_keys=env_keys)
        self.world_size = world_size
        self.backend: Any = None
        # A data-plane client (TQ path); a TQStore pickles to a lazy attach to the driver's store.
        self._plane = data_plane

    # --- set-up --------------------------------------------------------------------------

    def rendezvous_address(self) -> tuple[str, int]:
        """Rank 0's host and a free port for the process group's TCP store."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return self.host_ip(), port

    def setup(self, *, master: tuple[str, int], backend: str, backend_kwargs: dict[str, Any],
              weights: dict[str, torch.Tensor]) -> None:
        """Join the process group and build the backend from `weights` (also the reference)."""
        if self.world_size > 1:
            addr, port = master
            dist.init_process_group(
                "gloo", init_method=f"tcp://{addr}:{port}", rank=self.rank,
                world_size=self.world_size, timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S))
        self.backend = get_backend(backend)(weights=weights, **backend_kwargs)

    # --- data --------------------------------------------------------------------------------

    def _plane_client(self) -> Any:
        assert self._plane is not None, f"{self.name}: a KVBatchMeta came in but no data plane was given"
        return self._plane

    def _read(self, data: BatchedDataDict | KVBatchMeta, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        if isinstance(data, KVBatchMeta):
            return self._plane_client().get(data, list(fields))
        return {f: data[f] for f in fields}

    def _answer(self, data: BatchedDataDict | KVBatchMeta, columns: dict[str, torch.Tensor]) -> Any:
        """Legacy: the columns themselves. TQ: write them back and return the updated receipt."""
        if isinstance(data, KVBatchMeta):
            return self._plane_client().put(data, columns=columns)
        return BatchedDataDict(columns)

    # --- work ----------------------------------------------------------------------------------

    def get_logprobs(self, data: BatchedDataDict | KVBatchMeta, *, reference: bool = False) -> Any:
        """Column `prev_logprobs` (or `ref_logprobs`) for each row."""
        cols = self._read(data, SEQ_FIELDS)
        lp = self.backend.logprobs(cols["input_ids"], cols["attention_mask"], reference=reference)
        return self._answer(data, {"ref_logprobs" if reference else "prev_logprobs": lp})

    def train(self, data: BatchedDataDict | KVBatchMeta, *, num_tokens: int,
              loss_cfg: dict[str, Any]) -> dict[str, float]:
        """One optimizer step; metrics are this rank's share of the global means."""
        from rl.backends.torch import TRAIN_FIELDS

        cols = self._read(data, TRAIN_FIELDS)
        out = self.backend.train_step(cols, num_tokens=num_tokens, loss_cfg=LossConfig.from_dict(loss_cfg))
        out["rows"] = int(cols["input_ids"].shape[0])
        return out

    # --- weights and checkpoints -------------------------------------------------------------

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.backend.state_dict()

    def checkpoint_state(self) -> dict[str, Any]:
        return {"policy": self.backend.state_dict(), "optimizer": self.backend.optimizer_state(),
                "reference": self.backend.reference_state_dict()}

    def load_checkpoint(self, *, policy: dict, optimizer: dict, reference: dict | None) -> None:
        self.backend.load_state(policy=policy, optimizer=optimizer, reference=reference)
