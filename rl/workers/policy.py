"""The policy worker: one training rank (a Ray actor) that computes log-probs and trains.

It owns the rank's gloo/NCCL process group and its side of the data plane (`data_plane`, the
plane's `worker_client`: rl/data/plane.py `RankRows`), which reads the rows a call brings and
answers with the columns computed for them. Legacy: a `BatchedDataDict` came with the call and
the answer is the columns. TQ: a `KVBatchMeta` names rows in the store, computed columns are
written back under the same keys, and only receipts travel through the driver.

With model parallelism (megatron TP/EP) a rank is not always a data-parallel rank: `setup`
returns the backend's topology (`dp_rank`, `dp_size`, `reports_metrics`) and the driver gives
every rank of one replica the same rows. Only `reports_metrics` ranks answer log-probs (their
TP peers computed the same values); weights and checkpoints are collectives, so every rank
runs `state_dict` / `save_checkpoint` and only rank 0 returns (or writes) the HF-format weights.
"""

from __future__ import annotations

import datetime
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from rl import checkpoint, faults
from rl.algorithms.loss import LossConfig
from rl.backends import get_backend
from rl.backends.offload import HostOffload
from rl.backends.rules import backend_rules
from rl.backends.train_step import train_fields
from rl.cluster.ports import free_port
from rl.config import ModelConfig, PolicyConfig
from rl.data import BatchedDataDict, DataIntegrityError, KVBatchMeta
from rl.data.plane import RankRows
from rl.models.image_inputs import IMAGE_FIELDS
from rl.refit import buckets
from rl.refit.channel import SENDER, RefitChannel
from rl.workers.base import WorkerBase

__all__ = ["PolicyWorker"]

GLOO_TIMEOUT_S = 120
SEQ_FIELDS = ("input_ids", "attention_mask")
Method = TypeVar("Method", bound=Callable[..., Any])


def resident(method: Method) -> Method:
    """Refuse a call that reads the training state while it waits in host memory: its tensors
    hold no bytes then (rl/backends/offload.py), and a read would be garbage or a crash."""
    @functools.wraps(method)
    def call(self: "PolicyWorker", *args: Any, **kwargs: Any) -> Any:
        if self._host.offloaded:
            raise RuntimeError(f"{self.name}.{method.__name__}: the training state is in host memory "
                               "(generation.offload_training); reload it first")
        return method(self, *args, **kwargs)
    return call  # type: ignore[return-value]


class PolicyWorker(WorkerBase):
    """One DP rank. Built bare (fast), then `setup` joins the process group and loads weights."""

    role = "policy"

    def __init__(self, *, name: str, rank: int, world_size: int, env_keys: list[str],
                 data_plane: RankRows, unset_env: Sequence[str] = (),
                 secret_env: Mapping[str, str] | None = None, device: str = "cpu") -> None:
        super().__init__(name=name, rank=rank, env_keys=env_keys, unset_env=unset_env, secret_env=secret_env,
                         device=device)
        self.world_size = world_size
        self._shared: Any = None  # the refit buckets rank 0 keeps alive until the generator copied them
        self._channel: RefitChannel | None = None  # rank 0's end of the refit channel (generation not colocated)
        self.backend: Any = None
        self._rows = data_plane  # this rank's side of the data plane (reads rows, answers columns)
        self._train_calls = 0  # = the step in a fresh run (planted faults count steps by it)
        self.teacher: Any = None
        self.projection: Any = None
        self._host = HostOffload(device)  # the training state's place while the replicas decode

    # --- set-up --------------------------------------------------------------------------

    def rendezvous_address(self) -> tuple[str, int]:
        """Rank 0's host and a free port for the process group's TCP store."""
        return self.host_ip(), free_port("")

    def setup(self, *, master: tuple[str, int], model: ModelConfig, policy: PolicyConfig, vocab_size: int,
              seed: int, weights: dict[str, torch.Tensor] | None, teacher: Any = None) -> dict[str, Any]:
        """Join the process group, build `policy.backend` from the recipe's `model` and `policy`
        sections and `weights` (also the reference; None: the megatron backend reads this rank's
        shards from `model.path`) and, for distillation, the frozen teacher
        (`rl.distill.step.TeacherSpec`); return this rank's place in the data-parallel layout."""
        if self.world_size > 1:
            addr, port = master
            dist.init_process_group(
                "nccl" if self.device == "cuda" else "gloo", init_method=f"tcp://{addr}:{port}",
                rank=self.rank, world_size=self.world_size,
                timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S))
        device = {"device": self.device} if backend_rules(policy.backend).takes_device else {}
        self.backend = get_backend(policy.backend)(model=model, policy=policy, vocab_size=vocab_size, seed=seed,
                                                   weights=weights, **device)
        if teacher is not None:
            self._setup_teacher(teacher)
        return {"rank": self.rank, "dp_rank": self.backend.dp_rank, "dp_size": self.backend.dp_size,
                "reports_metrics": self.backend.reports_metrics}

    # --- data --------------------------------------------------------------------------------

    def _read(self, data: BatchedDataDict | KVBatchMeta, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        return self._rows.read(data, fields)

    def _image_fields(self, data: BatchedDataDict | KVBatchMeta) -> tuple[str, ...]:
        """The row-aligned image columns these rows carry (a vision-language model), else ()."""
        present = self._rows.fields(data)
        return tuple(f for f in IMAGE_FIELDS if f in present)

    def _answer(self, data: BatchedDataDict | KVBatchMeta, columns: dict[str, torch.Tensor]) -> Any:
        """Legacy: the columns themselves. TQ: write them back and return the updated receipt."""
        return self._rows.answer(data, columns)

    # --- work ----------------------------------------------------------------------------------

    @resident
    def get_logprobs(self, data: BatchedDataDict | KVBatchMeta, *, reference: bool = False) -> Any:
        """Column `prev_logprobs` (or `ref_logprobs`) for each row."""
        images = self._image_fields(data)
        cols = self._read(data, SEQ_FIELDS + images)
        lp = self.backend.logprobs(cols["input_ids"], cols["attention_mask"], reference=reference,
                                   **{f: cols[f] for f in images})
        if not self.backend.reports_metrics:
            return None  # a TP peer of a reporting rank: same values, dropped by the driver
        return self._answer(data, {"ref_logprobs" if reference else "prev_logprobs": lp})

    @resident
    def train(self, data: BatchedDataDict | KVBatchMeta, *, num_tokens: int,
              loss_cfg: LossConfig, step: int) -> dict[str, float]:
        """One optimizer step, training step `step` of the run (its lr); metrics are this rank's
        share of the global means. With `algorithm.loss.prev_logprobs: training` the rows'
        `prev_logprobs` are answered as `get_logprobs` answers them."""
        self._train_calls += 1
        self._plant_faults(self._train_calls)
        cols = self._read(data, train_fields(loss_cfg) + self._image_fields(data))
        out = self.backend.train_step(cols, num_tokens=num_tokens, loss_cfg=loss_cfg, step=step)
        prev = out.pop("prev_logprobs", None)  # `algorithm.loss.prev_logprobs: training`: the rows' column
        if prev is not None and self.backend.reports_metrics:
            answer = self._answer(data, {"prev_logprobs": prev})  # TQ: written to the store
            if self._rows.returns_columns:
                out["prev_logprobs"] = answer["prev_logprobs"]  # legacy: back with the metrics
        out["rows"] = int(cols["input_ids"].shape[0])
        if self.device == "cuda":
            out["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if faults.at("nan_loss", self._train_calls):
            out["loss"] = float("nan")
        return out

    def _setup_teacher(self, spec: Any) -> None:
        from rl.models import build_model

        self.teacher = build_model(spec.model, vocab_size=spec.vocab_size, seed=0)
        self.teacher.load_state_dict(spec.weights)
        self.teacher.to(self.device).eval().requires_grad_(False)
        self.projection = spec.projection

    @resident
    def distill(self, data: BatchedDataDict | KVBatchMeta, *, cfg: Any, step: int) -> dict[str, float]:
        """One optimizer step of cross-tokenizer distillation, training step `step` of the run (its
        lr); metrics are this rank's share.

        `projection_mismatch` is 1 when the projection the loss used is not the configured one
        (only the planted fault `xtoken_projection_from_max_index` makes one from the batch).
        """
        from rl.distill.step import DISTILL_FIELDS

        if self.teacher is None:
            raise DataIntegrityError(f"{self.name}: distill called but no teacher was set up")
        self._train_calls += 1
        self._plant_faults(self._train_calls)
        cols = self._read(data, DISTILL_FIELDS)
        projection = self.projection
        if faults.active("xtoken_projection_from_max_index"):  # the reference's seed bug
            projection = projection.cropped(int(cols["input_ids"].max()) + 1, int(cols["teacher_input_ids"].max()) + 1)
        out = self.backend.distill_step(cols, teacher=self.teacher, projection=projection, cfg=cfg, step=step,
                                        fold_sample_mask=not faults.active("xtoken_sample_mask_ignored"))
        out["rows"] = int(cols["input_ids"].shape[0])
        out["projection_mismatch"] = float(projection.shape != self.projection.shape)
        if self.device == "cuda":
            out["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        return out

    def _plant_faults(self, step: int) -> None:
        """worker_sigkill and worker_hang (rl/faults.py), on rank 1 only, so a peer is left waiting."""
        if self.rank != 1:
            return
        if faults.at("worker_sigkill", step):
            faults.crash()
        if faults.at("worker_hang", step):
            while True:
                time.sleep(3600)

    # --- the training state's stay in host memory (generation.offload_training) -------------

    def offload(self) -> int:
        """The training state to host memory while the generation replicas decode; bytes moved."""
        return self._host.offload(self.backend.training_state())

    def reload(self) -> int:
        """The training state back on the device for the log-prob and training passes; bytes moved."""
        return self._host.reload()

    # --- weights and checkpoints -------------------------------------------------------------

    @resident
    def state_dict(self) -> dict[str, torch.Tensor] | None:
        """HF-format policy weights on rank 0, None elsewhere; every rank must call it. On the
        CPU: the offload's host arena goes first, as for a checkpoint."""
        self._host.release()
        weights = self.backend.state_dict()
        return weights if self.rank == 0 else None

    @resident
    def refit_chunks(self) -> int:
        """How many chunks this backend's streamed refit takes; the same on every rank."""
        return self.backend.refit_chunks()

    @resident
    def share_weight_chunk(self, index: int, replicas: int = 1) -> Any:
        """Refit, colocated and streamed: chunk `index` of the HF-format weights (whole layers,
        gathered from the training layout on the device), packed into buckets and shared with the
        generation replicas (the answer of ranks below `replicas`: CUDA IPC handles on a GPU, the
        tensors on a CPU; None elsewhere). Every rank must call it with the same index. The
        buckets stay alive here until `release_weights`, so a GPU holds one chunk's transient."""
        weights = self.backend.refit_chunk(index)
        if self.rank >= replicas:
            return None
        self._shared = buckets.pack(weights)
        return buckets.share(self._shared)

    def release_weights(self) -> None:
        self._shared = None

    @resident
    def refit_layout(self) -> Any:
        """Rank 0's refit layout (rl/refit/buckets.py `layout_of` of the gathered HF weights), None
        elsewhere; every rank must call it. What the generator's end of a refit channel expects."""
        weights = self.backend.state_dict(on_device=True)
        return buckets.layout_of(weights) if self.rank == 0 else None

    def open_refit_channel(self, address: tuple[str, int], layout: list) -> None:
        """Rank 0: the sending end of the refit channel to a generator that is not colocated."""
        if self.rank == 0:
            self._channel = RefitChannel.open(address, rank=SENDER, layout=layout, device=self.device)

    @resident
    def send_weights(self) -> None:
        """Refit, not colocated: gather the HF weights on the device and broadcast them to the
        generator over the refit channel (rank 0). Every rank must call it."""
        weights = self.backend.state_dict(on_device=True)
        if self.rank == 0:
            self._channel.send(buckets.pack(weights))

    @resident
    def save_checkpoint(self, directory: str) -> dict[str, str]:
        """Write this rank's part of a checkpoint into DIRECTORY (rl/checkpoint.py): rank 0 the
        gathered weights, every rank its own optimizer state; {file name: SHA-256}. Every rank
        must call it (the weights are gathered). The host copies are built here, so the
        offload's host arena goes first (`HostOffload.release`), and the weights are on disk and
        freed before the optimizer state is copied."""
        self._host.release()
        files = {}
        weights = {"policy": self.backend.state_dict(), "reference": self.backend.reference_state_dict()}
        if self.rank == 0:
            files[checkpoint.WEIGHTS] = checkpoint.write(directory, checkpoint.WEIGHTS, weights)
        del weights
        name = checkpoint.optimizer_file(self.rank)
        files[name] = checkpoint.write(directory, name, self.backend.optimizer_state())
        return files

    @resident
    def load_checkpoint(self, optimizer_path: str, *, policy: dict, reference: dict | None) -> None:
        """Load the weights and THIS rank's optimizer state (saved under the same layout), which
        it reads from its own file."""
        path = Path(optimizer_path)
        optimizer = checkpoint.read(path.parent, path.name)
        self.backend.load_state(policy=policy, optimizer=optimizer, reference=reference)
