"""Ray for the engine: start or join a cluster, reserve a placement group, start named
workers, and wait on them so that a dead worker is named and nothing waits forever.

Where each worker runs is `rl.cluster.placement`'s rule (CPU fractions on a CPU box, one GPU bundle per
policy rank on a GPU machine); with several nodes each bundle is pinned to the Ray node chosen
for its node index (`assign_nodes`: the driver's node is node 0 when it fits). A private Ray
gets a fresh random auth token per run, so no other local user can submit work to it while the
run is up, and a 0700 temp dir of its own (its logs and sockets), removed after the run. The
recipe's secrets never enter a runtime env: each actor gets its own as constructor arguments.
Workers run at their raylet's CPU priority (`WORKER_NICENESS`), not at Ray's nice 15 below it.
Every remote call goes through `Cluster.get`, which waits with `ray.wait` and a
deadline and turns an actor death into `DeadWorkerError(name)`; when a worker raises instead
(e.g. its gloo peer vanished), the other workers are probed so the dead one is still the one
reported.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rl.cluster.placement import ActorSlot, Placement
from rl.cluster.worker_errors import DeadWorkerError, WorkerTimeoutError

__all__ = ["Cluster", "DeadWorkerError", "WorkerHandle", "WorkerTimeoutError", "assign_nodes", "start_ray"]

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0
# Ray waits a fixed 30 s for its raylet to register with the GCS (ray._private.node, not configurable);
# a loaded machine can miss it ("The current node timed out during startup"), so a private Ray that
# did is started again, in a fresh temp dir.
RAY_START_TIMED_OUT = "timed out during startup"
RAY_START_ATTEMPTS = 3
OBJECT_STORE_BYTES = 4 << 30  # explicit: a GPU machine's memory reads small at start (MACHINES.md)
NODE_ID_LABEL = "ray.io/node-id"  # a label Ray gives every node
# The GPU machines' NVLink-multicast switches: set in the driver's environment, they reach every worker.
PASS_THROUGH_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                    "NCCL_DEBUG", "CUDA_DEVICE_MAX_CONNECTIONS")
# Ray starts each worker at nice 15 (its `worker_niceness`) so that its raylet wins the CPU from them.
# The engine's workers are the run's work: at nice 15 beside busy processes of nice 0 a worker gets
# ~2% of a core (a two-node run's workers sat importing torch at 2.3% CPU for minutes on a loaded
# 2-core box: issue 38's "stall"). Each worker reads this from its environment as it starts: a
# private Ray's raylet passes it to every worker (TransferQueue's too), and each actor of ours
# carries it in its runtime env, which holds on a cluster we join as well.
WORKER_NICENESS = {"RAY_worker_niceness": "0"}


def start_ray(*, num_cpus: float, num_gpus: int = 0, withhold: Collection[str] = ()) -> str | None:
    """Join RAY_ADDRESS when set, else start a private local Ray (with the token that
    `arm_private_auth` set, when the process called it before importing Ray) in a temp dir of
    its own. Returns that dir (0700, under /tmp: Ray's socket paths must stay under ~107
    characters), which the caller removes after `ray.shutdown()`; None when nothing was started.

    The private Ray's processes (GCS, raylet, every worker they fork) copy this process's
    environment as it is now: the names in `withhold` (the recipe's secrets) are left out of it
    while they start, so a secret lives only in the driver and in the workers it was handed to.
    """
    if ray.is_initialized():
        return None
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
        return None
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        temp_dir = tempfile.mkdtemp(prefix="rl-ray-", dir="/tmp")
        log.info("private Ray in %s (removed after the run)", temp_dir)
        try:
            with _withheld(withhold), _defaults(WORKER_NICENESS):
                ray.init(address="local", num_cpus=max(int(num_cpus + 0.999), 1), num_gpus=num_gpus,
                         object_store_memory=OBJECT_STORE_BYTES if num_gpus else None,
                         include_dashboard=False, log_to_driver=True, _temp_dir=temp_dir)
            return temp_dir
        except Exception as error:  # noqa: BLE001 - only Ray's start-up timeout is retried; the rest re-raised
            ray.shutdown()
            shutil.rmtree(temp_dir, ignore_errors=True)
            if RAY_START_TIMED_OUT not in str(error) or attempt == RAY_START_ATTEMPTS:
                raise
            log.warning("private Ray: %s (attempt %d of %d); starting it again", error, attempt, RAY_START_ATTEMPTS)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _defaults(values: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` with those of `values` it lacks, for the duration (Ray's processes started
    meanwhile keep them); a name the environment sets (a recipe's env allowed to) is left as it is."""
    added = {name: value for name, value in values.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def _withheld(names: Collection[str]) -> Iterator[None]:
    """`os.environ` without `names` for the duration."""
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def assign_nodes(placement: Placement, nodes: list[dict[str, Any]], *, driver_node: str) -> list[str]:
    """The Ray node id for each of the placement's node indexes, from `ray.nodes()` records:
    the driver's node first, then the others by address and id, each the first alive node whose
    resources hold that index's bundles. Raises ValueError naming `cluster.nodes` when too few fit."""
    alive = sorted((n for n in nodes if n.get("Alive")),
                   key=lambda n: (n["NodeID"] != driver_node, n.get("NodeManagerAddress", ""), n["NodeID"]))
    chosen: list[str] = []
    for index in range(placement.nodes):
        need: dict[str, float] = {}
        for bundle in placement.node_bundles(index):
            for key, amount in bundle.items():
                need[key] = need.get(key, 0.0) + amount
        fits = [n["NodeID"] for n in alive if n["NodeID"] not in chosen
                and all(n.get("Resources", {}).get(k, 0.0) >= v for k, v in need.items())]
        if not fits:
            have = [{k: n.get("Resources", {}).get(k, 0.0) for k in need} for n in alive]
            raise ValueError(f"cluster.nodes: {placement.nodes} nodes asked for, node {index} needs {need}; "
                             f"the Ray cluster's {len(alive)} alive nodes have {have} ({len(chosen)} taken)")
        chosen.append(fits[0])
    return chosen


def worker_env(recipe_env: Mapping[str, str | None], *, gpu: bool) -> dict[str, str]:
    """The env a worker starts with: its role's recipe env (None: left unset, RunConfig.worker_env),
    the GPU switches set in the driver's environment, one CPU thread, the raylet's CPU priority;
    a CPU worker sees no GPU (a CPU recipe runs the same anywhere)."""
    env: dict[str, str | None] = {k: os.environ[k] for k in PASS_THROUGH_ENV if k in os.environ}
    env.update(recipe_env)
    env["OMP_NUM_THREADS"] = "1"
    for name, value in WORKER_NICENESS.items():
        env.setdefault(name, value)  # a recipe's own (allowed by env_unsafe_allow) wins
    if gpu:
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's condition for deterministic kernels
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return {k: v for k, v in env.items() if v is not None}


@dataclass
class WorkerHandle:
    name: str
    role: str
    rank: int
    actor: Any


@dataclass
class Cluster:
    """The workers of one run, their placement group, and guarded waiting."""

    placement: Placement
    env_vars: dict[str, dict[str, str | None]] = field(default_factory=dict)  # role -> RunConfig.worker_env(role)
    secret_names: frozenset[str] = frozenset()  # handed to each actor's constructor, never in its runtime env
    workers: list[WorkerHandle] = field(default_factory=list)

    def __post_init__(self) -> None:
        selector = None
        if self.placement.nodes > 1:
            ids = assign_nodes(self.placement, ray.nodes(), driver_node=ray.get_runtime_context().get_node_id())
            selector = [{NODE_ID_LABEL: ids[n]} for n in self.placement.node_of]
            log.info("placement: nodes %s, bundles' nodes %s", ids, self.placement.node_of)
        self._pg = placement_group(self.placement.bundles, strategy="PACK", bundle_label_selector=selector)
        try:
            ray.get(self._pg.ready(), timeout=120)
        except GetTimeoutError:
            raise WorkerTimeoutError(
                f"placement group {self.placement.bundles} not ready in 120 s; "
                f"cluster resources: {ray.cluster_resources()}") from None

    def spawn(self, cls: type, *, slot: ActorSlot, name: str, role: str, rank: int, **kwargs: Any) -> WorkerHandle:
        """Start actor `cls(name=..., rank=..., env_keys=..., unset_env=..., secret_env=..., **kwargs)`
        in its slot of the placement group, with its role's env: the secrets among it as the
        constructor's `secret_env`, the rest as its runtime env (which Ray writes into the worker's
        command line, readable by any local user, and into its runtime_env_agent.log)."""
        if not 0 <= slot.bundle < len(self.placement.bundles):
            raise ValueError(f"{name}: bundle {slot.bundle} is not in the placement group")
        recipe_env = self.env_vars[role]
        env = worker_env(recipe_env, gpu=self.placement.gpu)
        secrets = {k: env.pop(k) for k in sorted(self.secret_names & env.keys())}
        actor = ray.remote(cls).options(
            num_cpus=slot.num_cpus,
            num_gpus=slot.num_gpus,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self._pg, placement_group_bundle_index=slot.bundle),
            runtime_env={"env_vars": env},
        ).remote(name=name, rank=rank, env_keys=sorted(recipe_env),
                 unset_env=[k for k, v in recipe_env.items() if v is None], secret_env=secrets, **kwargs)
        handle = WorkerHandle(name=name, role=role, rank=rank, actor=actor)
        self.workers.append(handle)
        return handle

    def call(self, handles: list[WorkerHandle], method: str, per_worker_args: list[tuple] | None = None,
             *, timeout_s: float = 600.0, **kwargs: Any) -> list[Any]:
        """Run `method` on each handle (optionally with its own positional args) and wait."""
        args = per_worker_args or [()] * len(handles)
        refs = [getattr(h.actor, method).remote(*a, **kwargs) for h, a in zip(handles, args)]
        return self.get(refs, [h.name for h in handles], timeout_s=timeout_s)

    def get(self, refs: list[Any], names: list[str], *, timeout_s: float) -> list[Any]:
        """`ray.get(refs)` that names a dead worker and never waits past `timeout_s`."""
        pending = dict(zip(refs, names))
        results: dict[Any, Any] = {}
        deadline = time.monotonic() + timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self._raise_if_dead()
                raise WorkerTimeoutError(f"no answer in {timeout_s:.0f} s from {sorted(pending.values())}")
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, 1.0))
            for ref in ready:
                results[ref] = self._fetch(ref, pending.pop(ref))
        return [results[ref] for ref in refs]

    def _fetch(self, ref: Any, name: str) -> Any:
        try:
            return ray.get(ref, timeout=0)
        except RayActorError as exc:
            raise DeadWorkerError(name, type(exc).__name__) from None
        except RayTaskError as exc:
            # A worker raised. If a peer died (broken collective), report the dead peer.
            self._raise_if_dead()
            raise RuntimeError(f"worker {name} failed: {exc}") from None

    def _raise_if_dead(self) -> None:
        """Ping every worker; a dead one raises DeadWorkerError, a busy one counts as alive."""
        refs = {h.actor.ping.remote(): h.name for h in self.workers}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
        for ref in ready:
            try:
                ray.get(ref, timeout=0)
            except RayActorError as exc:
                raise DeadWorkerError(refs[ref], type(exc).__name__) from None
            except Exception:  # noqa: BLE001 - any other failure is not a death
                pass

    def shutdown(self) -> None:
        """Kill our actors and free the placement group (we may share a joined cluster)."""
        for handle in self.workers:
            try:
                ray.kill(handle.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass
        try:
            remove_placement_group(self._pg)
        except Exception:  # noqa: BLE001
            pass
        self.workers.clear()
