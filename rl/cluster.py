"""Ray for the engine: start or join a cluster, reserve a placement group, start named
workers, and wait on them so that a dead worker is named and nothing waits forever.

Workers are plain Ray actors with fractional `num_cpus` (MACHINES.md: a leftover actor holding
a whole CPU once kept the second gloo rank from being scheduled). Every remote call goes
through `Cluster.get`, which waits with `ray.wait` and a deadline and turns an actor death into
`DeadWorkerError(name)`; when a worker raises instead (e.g. its gloo peer vanished), the other
workers are probed so the dead one is still the one reported.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

__all__ = ["Cluster", "DeadWorkerError", "WorkerHandle", "WorkerTimeoutError", "start_ray"]

log = logging.getLogger(__name__)

WORKER_CPUS = 0.25  # fractional: several workers share the 2 cores of a CPU box
PROBE_TIMEOUT_S = 3.0


class DeadWorkerError(RuntimeError):
    """A worker process died; `worker` is its name (e.g. "policy-1")."""

    def __init__(self, worker: str, detail: str = "") -> None:
        super().__init__(f"worker {worker} died" + (f": {detail}" if detail else ""))
        self.worker = worker


class WorkerTimeoutError(RuntimeError):
    """Workers did not answer within the deadline."""


def start_ray(*, num_cpus: int) -> bool:
    """Join RAY_ADDRESS when set, else start a private local Ray. Returns True when started here."""
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
        return False
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
    return True


@dataclass
class WorkerHandle:
    name: str
    role: str
    rank: int
    actor: Any


@dataclass
class Cluster:
    """The workers of one run, their placement group, and guarded waiting."""

    bundles: int
    env_vars: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerHandle] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pg = placement_group([{"CPU": WORKER_CPUS}] * self.bundles, strategy="PACK")
        try:
            ray.get(self._pg.ready(), timeout=120)
        except GetTimeoutError:
            raise WorkerTimeoutError(
                f"placement group of {self.bundles} x {WORKER_CPUS} CPU not ready in 120 s; "
                f"cluster resources: {ray.cluster_resources()}") from None

    def spawn(self, cls: type, *, name: str, role: str, rank: int, **kwargs: Any) -> WorkerHandle:
        """Start actor `cls(name=..., **kwargs)` in the next free bundle."""
        index = len(self.workers)
        assert index < self.bundles, f"no bundle left for {name}"
        env = {**self.env_vars, "OMP_NUM_THREADS": "1"}
        actor = ray.remote(cls).options(
            num_cpus=WORKER_CPUS,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self._pg, placement_group_bundle_index=index),
            runtime_env={"env_vars": env},
        ).remote(name=name, rank=rank, **kwargs)
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
