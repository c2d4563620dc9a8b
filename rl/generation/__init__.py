"""Rollout generation: our own KV-cache sampling loop over a Hugging Face causal LM."""

from rl.generation.generation import Generation, decode_responses
from rl.generation.sampler import generate, row_seeds

__all__ = ["Generation", "decode_responses", "generate", "row_seeds"]
