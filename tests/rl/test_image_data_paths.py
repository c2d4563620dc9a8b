"""Image columns on both data paths: the policy ranks see the same image rows either way.

A vision-language step puts `pixel_values` [B, N, D] and `image_grid_thw` [B, 3] next to the
token columns. On the TQ path they go into the data plane, log-probs are sharded by sequence
length (a permutation of the rows) and training reads contiguous blocks back; on the legacy
path they travel with the `BatchedDataDict`. This drives one step's data flow (put, prev and
reference log-probs, read-back, train) through the real `LegacyPlane`/`TQPlane`, `PolicyGroup`
with `dp_dispatch`, and `PolicyWorker`, over an in-memory store, with a backend that records
what it was given. Every image row must reach the rank that scores or trains its tokens, and
everything the driver reads back must be bitwise identical on both paths.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rl.algorithms.loss import LossConfig
from rl.data.memory_store import MemoryStore
from rl.data.plane import LegacyPlane, TQPlane, contiguous_blocks
from rl.data.sharding import shard_keys_by_seqlen
from rl.models.flops import FlopsConfig
from rl.models.image_inputs import IMAGE_FIELDS
from rl.workers.group import PolicyGroup
from rl.workers.policy import PolicyWorker

DP, G, PROMPTS, WIDTH, PATCHES, PATCH_DIM = 2, 4, 2, 10, 4, 6
FLOPS = FlopsConfig(num_layers=1, hidden_size=8, q_dim=8, kv_dim=8, ffn_dim=16, vocab_size=32,
                    num_full_attention_layers=1)


class ImageRecordingBackend:
    """A policy backend whose log-probs depend on each row's tokens AND its image, and whose
    train step records the columns it got (a rank that lost or misaligned images shows)."""

    dp_size, reports_metrics = DP, True

    def __init__(self, dp_rank: int) -> None:
        self.dp_rank = dp_rank
        self.logprob_images: list[tuple[str, ...]] = []
        self.trained: list[dict[str, torch.Tensor]] = []

    def logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, reference: bool,
                 **images: torch.Tensor) -> torch.Tensor:
        self.logprob_images.append(tuple(sorted(images)))
        assert images["pixel_values"].shape[0] == input_ids.shape[0]
        image_term = images["pixel_values"].mean(dim=(1, 2)) + images["image_grid_thw"].sum(dim=1)
        lp = -1e-3 * input_ids.float() - image_term[:, None] - (0.5 if reference else 0.0)
        return lp * attention_mask

    def train_step(self, batch: dict[str, torch.Tensor], *, num_tokens: int,
                   loss_cfg: LossConfig, step: int) -> dict[str, float]:
        self.trained.append({k: v.clone() for k, v in batch.items()})
        mask = batch["response_mask"].float() * batch["sample_mask"][:, None]
        return {"loss": float((batch["prev_logprobs"] * mask).sum() / num_tokens),
                "pixel_sum": float(batch["pixel_values"].double().sum()),
                "grad_norm": 0.0}


class InProcessCluster:
    """`Cluster.call` on in-process workers, in rank order."""

    def call(self, handles: list[PolicyWorker], method: str, per_worker_args: list[tuple], *,
             timeout_s: float, **kwargs: Any) -> list[Any]:
        return [getattr(h, method)(*args, **kwargs) for h, args in zip(handles, per_worker_args, strict=True)]


@pytest.fixture(autouse=True)
def _keep_threads():
    threads = torch.get_num_threads()  # PolicyWorker sets one thread, as an actor would
    yield
    torch.set_num_threads(threads)


# What the GRPO driver reads back after both log-prob passes (a run with a KL term).
READ_BACK = ("prev_logprobs", "ref_logprobs", "gen_logprobs", "response_mask")

def _rollout() -> tuple[list[str], dict[str, torch.Tensor], list[int]]:
    """Rows of unequal length (so log-prob sharding permutes them), a distinct image per row."""
    rows = PROMPTS * G
    gen = torch.Generator().manual_seed(0)
    lengths = [6, 10, 7, 9, 10, 6, 8, 7]
    assert len(lengths) == rows
    attention = torch.zeros(rows, WIDTH, dtype=torch.long)
    response = torch.zeros(rows, WIDTH, dtype=torch.long)
    for i, n in enumerate(lengths):
        attention[i, :n] = 1
        response[i, 4:n] = 1
    columns = {
        "input_ids": torch.randint(1, 32, (rows, WIDTH), generator=gen) * attention,
        "attention_mask": attention,
        "response_mask": response,
        "gen_logprobs": -torch.rand(rows, WIDTH, generator=gen) * response,
        "pixel_values": torch.randn(rows, PATCHES, PATCH_DIM, generator=gen),
        "image_grid_thw": torch.tensor([[1, 2, 2]] * rows) + torch.arange(rows)[:, None] % 3,
    }
    uids = [f"c0p{j}" for j in range(PROMPTS) for _ in range(G)]
    return uids, columns, lengths


def _step(path_name: str) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[ImageRecordingBackend]]:
    """One step's data flow; returns what the driver read back, train metrics, the backends."""
    path = TQPlane(store=MemoryStore(), group_size=G) if path_name == "tq" else LegacyPlane(group_size=G)
    workers = [PolicyWorker(name=f"policy-{r}", rank=r, world_size=DP, env_keys=[], data_plane=path.worker_client)
               for r in range(DP)]
    backends = [ImageRecordingBackend(r) for r in range(DP)]
    for worker, backend in zip(workers, backends):
        worker.backend = backend
    group = PolicyGroup(cluster=InProcessCluster(), ranks=workers, flops_cfg=FLOPS,  # type: ignore[arg-type]
                        device="cpu", num_ranks=DP, record_invariant=lambda _: None)
    uids, columns, lengths = _rollout()
    handle = path.put_rollout(step=1, uids=uids, columns=columns, lengths=lengths)
    handle = path.logprobs(handle, group, reference=False)
    handle = path.logprobs(handle, group, reference=True)
    read = path.read(handle, READ_BACK)
    rows = len(uids)
    num_tokens = int(read["response_mask"].sum())
    train = path.train(handle, group, advantages=torch.linspace(-1, 1, rows), sample_mask=torch.ones(rows),
                       num_tokens=num_tokens, loss_cfg=LossConfig(), step=1)
    path.finish(handle)
    return read, train, backends


def test_rollout_rows_are_permuted_by_logprob_sharding() -> None:
    """The TQ log-prob shards are not the legacy contiguous blocks (else this file tests little)."""
    from rl.data import KVBatchMeta

    uids, _, lengths = _rollout()
    meta = KVBatchMeta(partition_id="p", keys=tuple(f"{u}_g{i % G}" for i, u in enumerate(uids)),
                       sequence_lengths=tuple(lengths))
    shards = [list(s.keys) for s in shard_keys_by_seqlen(meta, DP)]
    blocks = [list(meta.keys[a:b]) for a, b in contiguous_blocks(len(meta), DP)]
    assert shards != blocks


def _differences() -> list[str]:
    """What differs between the two paths' step: read-back columns, rank inputs, metrics."""
    legacy_read, legacy_train, legacy_backends = _step("legacy")
    tq_read, tq_train, tq_backends = _step("tq")
    diff = []
    for path, backends in (("legacy", legacy_backends), ("tq", tq_backends)):
        for backend in backends:
            if backend.logprob_images != [tuple(sorted(IMAGE_FIELDS))] * 2:  # prev and ref calls
                diff.append(f"{path} rank {backend.dp_rank} log-prob images {backend.logprob_images}")
    diff += [f"read {name}" for name in READ_BACK if not torch.equal(legacy_read[name], tq_read[name])]
    for rank, (lb, tb) in enumerate(zip(legacy_backends, tq_backends)):
        (legacy_cols,), (tq_cols,) = lb.trained, tb.trained
        if sorted(legacy_cols) != sorted(tq_cols):
            diff.append(f"rank {rank} train fields {sorted(legacy_cols)} vs {sorted(tq_cols)}")
            continue
        diff += [f"rank {rank} train {name}" for name in legacy_cols
                 if legacy_cols[name].dtype != tq_cols[name].dtype
                 or not torch.equal(legacy_cols[name], tq_cols[name])]
    if legacy_train != tq_train:
        diff.append(f"train metrics {legacy_train} vs {tq_train}")
    _, columns, _ = _rollout()
    if legacy_train["pixel_sum"] != float(columns["pixel_values"].double().sum()):
        diff.append("legacy ranks did not train on every image row")
    return diff


def test_both_paths_give_every_rank_the_same_image_rows_and_the_driver_the_same_columns() -> None:
    assert _differences() == []


def test_misaligned_image_rows_on_the_tq_path_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: TQ workers that pair each row with another row's image."""
    from rl.data import KVBatchMeta

    read = PolicyWorker._read

    def shifted(self: PolicyWorker, data: Any, fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
        cols = read(self, data, fields)
        if isinstance(data, KVBatchMeta) and "pixel_values" in cols:
            cols["pixel_values"] = cols["pixel_values"].roll(1, dims=0)
        return cols

    monkeypatch.setattr(PolicyWorker, "_read", shifted)
    diff = _differences()
    assert "read prev_logprobs" in diff and "rank 0 train pixel_values" in diff, diff
