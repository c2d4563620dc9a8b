"""Rollout generation: our own KV-cache sampling loop over a Hugging Face causal LM."""

from rl.generation.sampler import Generation, decode_responses, generate

__all__ = ["Generation", "decode_responses", "generate"]
