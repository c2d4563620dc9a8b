"""Where each worker runs: the placement group's bundles and each actor's share of one.

One rule, stated once (docs/architecture.md, "Placement"):
* CPU runs: one bundle per worker with a fraction of a CPU (several workers share the 2 cores
  of a CPU box; a whole CPU per actor once kept the second gloo rank from being scheduled).
  CPU workers are told to see no GPU, so a CPU recipe behaves the same on a GPU machine.
* GPU runs: one bundle per policy rank, `{"GPU": 1, "CPU": CPUS_PER_GPU}`. Colocated generation
  (the default) puts generation replica i in policy rank i's bundle beside the policy actor, the
  GPU split between them, as the reference's colocated mode shares the training GPUs; with
  `generation.colocated: false` each generation replica gets a bundle (and a GPU) of its own.
* Generation replicas (`generation.replicas`; `generation_replicas` states the rule): as many
  as asked, or, when the recipe leaves it null, one per GPU when colocated on GPUs, else one.
* Several nodes (`cluster.nodes` > 1): the same bundles, each pinned to a node (`node_of`):
  policy rank r on node r // devices_per_node (node-major, so consecutive ranks, the TP/CP/EP
  groups, stay inside a node and data parallelism crosses nodes), a colocated replica beside its
  rank, a bundle of the generation's own on node 0 beside rank 0, whose address is the process
  group's rendezvous.
Ray sets CUDA_VISIBLE_DEVICES for an actor that reserves GPUs, so every GPU worker sees exactly
its own device as cuda:0 (MACHINES.md: Ray 2.60 leaves it alone for actors that reserve none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

__all__ = ["CPUS_PER_GPU", "GPU_DEVICES", "WORKER_CPUS", "ActorSlot", "Placement", "generation_replicas", "is_gpu",
           "plan_placement"]

WORKER_CPUS = 0.25
T = TypeVar("T")
CPUS_PER_GPU = 2
GPU_SHARE_COLOCATED = 0.5
GPU_DEVICES = ("h100", "h200", "a100")


def is_gpu(device: str) -> bool:
    """True for a GPU class named in `cluster.device`."""
    return device in GPU_DEVICES


@dataclass(frozen=True, kw_only=True)
class ActorSlot:
    """One actor's place: its bundle and what it reserves there."""

    bundle: int
    num_cpus: float
    num_gpus: float


@dataclass(frozen=True, kw_only=True)
class Placement:
    bundles: list[dict[str, float]]
    policy: list[ActorSlot]
    generation: list[ActorSlot]  # one per generation replica
    gpu: bool
    node_of: list[int]  # the node index (0 = rank 0's) of each bundle

    @property
    def nodes(self) -> int:
        return max(self.node_of) + 1

    def node_bundles(self, node: int) -> list[dict[str, float]]:
        """The bundles one node must hold."""
        return [b for b, n in zip(self.bundles, self.node_of) if n == node]

    @property
    def num_gpus(self) -> int:
        return int(sum(b.get("GPU", 0) for b in self.bundles))

    @property
    def num_cpus(self) -> float:
        return sum(b.get("CPU", 0) for b in self.bundles)


def per_gpu(ranks: list[T], gens: list[T], *, colocated: bool) -> list[list[T]]:
    """What each GPU's processes answered: policy rank i's with generation replica i's where they
    share a GPU (colocated), every other process alone on its own."""
    gpus = [[r] for r in ranks]
    for i, g in enumerate(gens):
        if colocated and i < len(gpus):
            gpus[i].append(g)
        else:
            gpus.append([g])
    return gpus


def generation_replicas(asked: int | None, *, device: str, world_size: int, colocated: bool) -> int:
    """How many generation replicas a run has: `asked` (`generation.replicas`), or when it is None
    one per GPU when colocated on GPUs (replica i beside policy rank i), else one."""
    if asked is not None:
        return asked
    return world_size if is_gpu(device) and colocated else 1


def plan_placement(*, device: str, world_size: int, colocated: bool = True, nodes: int = 1,
                   replicas: int | None = None) -> Placement:
    """Bundles and actor slots for `world_size` policy ranks over `nodes` nodes and the generation
    replicas (`replicas`: `generation.replicas`, None derived by `generation_replicas`)."""
    if world_size < 1:
        raise ValueError(f"cluster: world size must be >= 1, got {world_size}")
    if nodes < 1 or world_size % nodes:
        raise ValueError(f"cluster.nodes: {nodes} nodes cannot share {world_size} ranks evenly")
    count = generation_replicas(replicas, device=device, world_size=world_size, colocated=colocated)
    per_node = world_size // nodes
    rank_nodes = [r // per_node for r in range(world_size)]
    if not is_gpu(device):
        bundles = [{"CPU": WORKER_CPUS}] * (world_size + count)
        policy = [ActorSlot(bundle=r, num_cpus=WORKER_CPUS, num_gpus=0.0) for r in range(world_size)]
        generation = [ActorSlot(bundle=world_size + i, num_cpus=WORKER_CPUS, num_gpus=0.0) for i in range(count)]
        return Placement(bundles=bundles, policy=policy, gpu=False, node_of=[*rank_nodes, *[0] * count],
                         generation=generation)
    bundles = [{"GPU": 1.0, "CPU": float(CPUS_PER_GPU)} for _ in range(world_size)]
    if colocated:
        if count > world_size:
            raise ValueError(f"generation.replicas: {count} colocated replicas need as many GPUs; "
                             f"the run has {world_size}")
        # Rank i's bundle holds rank i and replica i; the other ranks' actors take their whole GPU.
        policy = [ActorSlot(bundle=r, num_cpus=1.0, num_gpus=GPU_SHARE_COLOCATED if r < count else 1.0)
                  for r in range(world_size)]
        generation = [ActorSlot(bundle=i, num_cpus=1.0, num_gpus=GPU_SHARE_COLOCATED) for i in range(count)]
        node_of = rank_nodes
    else:
        bundles += [{"GPU": 1.0, "CPU": float(CPUS_PER_GPU)} for _ in range(count)]
        policy = [ActorSlot(bundle=r, num_cpus=1.0, num_gpus=1.0) for r in range(world_size)]
        generation = [ActorSlot(bundle=world_size + i, num_cpus=1.0, num_gpus=1.0) for i in range(count)]
        node_of = [*rank_nodes, *[0] * count]
    return Placement(bundles=bundles, policy=policy, generation=generation, gpu=True, node_of=node_of)
