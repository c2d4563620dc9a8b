"""Ray actors of the engine: policy ranks (log-probs, training) and the generation worker."""

from rl.workers.generation import GenerationWorker
from rl.workers.policy import PolicyWorker

__all__ = ["GenerationWorker", "PolicyWorker"]
