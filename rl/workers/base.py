"""What every engine worker shares: one CPU thread, identity for env.json, and a liveness ping."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl.recipe.secret_env import digest


class WorkerBase:
    """Base of the Ray actor classes; `role` names the kind of worker in env.json."""

    role = "worker"

    def __init__(self, *, name: str, rank: int, env_keys: list[str], unset_env: Sequence[str] = (),
                 secret_env: Mapping[str, str] | None = None, device: str = "cpu") -> None:
        # `secret_env`: the recipe's secrets, handed over as constructor arguments because Ray
        # writes a runtime env into worker command lines and its logs (rl/cluster/ray_cluster.py).
        os.environ.update(secret_env or {})
        # `unset_env`: variables only the other role's env sets (RunConfig.worker_env). They can
        # still reach this process from outside its runtime env: a local Ray starts workers from
        # the driver's environment, which holds the role secrets the harness handed over, and a
        # Ray job's env reaches all its actors. Removed before any library reads them.
        for key in unset_env:
            os.environ.pop(key, None)
        # Workers share the box's cores with each other: one intra-op thread each, and the
        # same thread count everywhere keeps CPU kernels' reduction order reproducible.
        torch.set_num_threads(1)
        self.name = name
        self.rank = rank
        self.env_keys = list(env_keys)
        self.device = device
        self._kernel_trace: Any = None  # profile.kernel_steps' trace of this process, while one runs
        if device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError(f"{name}: placed on a GPU but CUDA sees none "
                                   f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
            torch.cuda.set_device(0)  # Ray made our GPU the only one visible

    def ping(self) -> bool:
        return True

    @staticmethod
    def host_ip() -> str:
        try:
            import ray

            return ray.util.get_node_ip_address()
        except Exception:  # noqa: BLE001 - outside Ray (unit tests)
            return socket.gethostbyname(socket.gethostname())

    @staticmethod
    def node_id() -> str | None:
        """The Ray node this worker runs on (two nodes of one machine share a host name)."""
        try:
            import ray

            return ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - outside Ray (unit tests)
            return None

    def device_memory(self, reset: bool = False) -> tuple[float, float]:
        """(allocated, peak since the last reset) GiB of this process's tensors on its GPU, zeros
        on a CPU; `reset` begins a new peak (rl/metrics/phase_memory.py brackets a phase so)."""
        if self.device != "cuda":
            return 0.0, 0.0
        out = torch.cuda.memory_allocated() / 2**30, torch.cuda.max_memory_allocated() / 2**30
        if reset:
            torch.cuda.reset_peak_memory_stats()
        return out

    def kernel_trace_start(self) -> None:
        """Begin tracing this process's CUDA kernels (`profile.kernel_steps`, rl/metrics/kernel_trace.py)."""
        from rl.metrics.kernel_trace import KernelTrace

        if self.device != "cuda":
            raise RuntimeError(f"{self.name}: profile.kernel_steps traces CUDA kernels; this worker runs on the CPU")
        self._kernel_trace = KernelTrace()
        self._kernel_trace.start()

    def kernel_trace_stop(self) -> Any:
        """The traced kernels, copies and memsets since `kernel_trace_start`: int64 [n, 2] epoch ns."""
        trace, self._kernel_trace = self._kernel_trace, None
        if trace is None:
            raise RuntimeError(f"{self.name}: kernel trace stopped before it started")
        return trace.stop()

    def info(self, salt: str = "") -> dict[str, Any]:
        """This worker's env.json record: who it is, where it runs, and a salted hash of each
        recipe env value it saw, None where unset (never the value: secrets pass through here)."""
        return {
            "name": self.name,
            "role": self.role,
            "rank": self.rank,
            "host": socket.gethostname(),
            "host_ip": self.host_ip(),
            "node_id": self.node_id(),
            "device": "cpu" if not torch.cuda.is_available() else f"cuda:{torch.cuda.current_device()}",
            "pid": os.getpid(),
            "env_digest": {key: digest(salt, os.environ.get(key)) for key in self.env_keys},
        }
