"""The workers of one run, each role built from its own recipe sections (rl/run.py `Engine.setup`).

Spawning is separate from setting up: the actors boot while the driver builds the initial
weights, and `setup` is sent once those are in the object store. The sections travel to the
actors as they are (typed dataclasses pickle through Ray), so a key's name is the recipe's all
the way to the backend.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rl.workers.generation import GenerationWorker
from rl.workers.policy import PolicyWorker

if TYPE_CHECKING:
    from rl.cluster.placement import Placement
    from rl.cluster.ray_cluster import Cluster, WorkerHandle
    from rl.config import GenerationConfig, ModelConfig, PolicyConfig

__all__ = ["setup_generation_workers", "setup_policy_workers", "spawn_generation_workers", "spawn_policy_workers"]


def spawn_policy_workers(cluster: Cluster, placement: Placement, *, world_size: int, data_plane: Any,
                         device: str) -> list[WorkerHandle]:
    """One `PolicyWorker` per rank, each with its side of the data plane (`DataPlane.worker_client`)."""
    return [cluster.spawn(PolicyWorker, slot=placement.policy[r], name=f"policy-{r}", role="policy", rank=r,
                          world_size=world_size, data_plane=data_plane, device=device)
            for r in range(world_size)]


def spawn_generation_workers(cluster: Cluster, placement: Placement, generation: GenerationConfig, *,
                             precision: str, decode: str, device: str) -> list[WorkerHandle]:
    """One `GenerationWorker` per replica slot, decoding in the policy's `precision` with the
    loop `decode` resolved for this machine (rl/generation/decode_mode.py)."""
    return [cluster.spawn(GenerationWorker, slot=slot, name=f"generation-{i}", role="generation", rank=i,
                          device=device, precision=precision, decode=decode, decode_slots=generation.decode_slots)
            for i, slot in enumerate(placement.generation)]


def setup_policy_workers(ranks: list[WorkerHandle], *, master: tuple[str, int], model: ModelConfig,
                         policy: PolicyConfig, vocab_size: int, seed: int, weights: Any, teacher: Any) -> list[Any]:
    """Every rank's `setup` call (object refs): its backend from the `model` and `policy` sections.
    `policy.env` stays behind: the rank got its role's env when it was spawned (rl/cluster/ray_cluster.py), and
    secret values travel in no task argument."""
    policy = replace(policy, env={})
    return [h.actor.setup.remote(master=master, model=model, policy=policy, vocab_size=vocab_size, seed=seed,
                                 weights=weights, teacher=teacher) for h in ranks]


def setup_generation_workers(gens: list[WorkerHandle], *, model: ModelConfig, vocab_size: int, seed: int,
                             weights: Any) -> list[Any]:
    """Every replica's `setup` call (object refs): its model from the `model` section."""
    return [g.actor.setup.remote(model=model, vocab_size=vocab_size, seed=seed, weights=weights) for g in gens]
