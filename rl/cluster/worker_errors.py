"""How a run's workers fail, named so the engine can say which one (no Ray import here: the
engine decides its Ray settings before Ray is imported)."""

from __future__ import annotations

__all__ = ["DeadWorkerError", "WorkerTimeoutError"]


class DeadWorkerError(RuntimeError):
    """A worker process died; `worker` is its name (e.g. "policy-1")."""

    def __init__(self, worker: str, detail: str = "") -> None:
        super().__init__(f"worker {worker} died" + (f": {detail}" if detail else ""))
        self.worker = worker


class WorkerTimeoutError(RuntimeError):
    """Workers did not answer within the deadline."""
