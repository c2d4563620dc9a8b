"""The generation worker: a Ray actor that samples rollouts with a KV cache.

It holds its own copy of the policy weights and is refit from policy rank 0 before every
step's rollouts (a state dict through the object store); `load_weights` reports how long the
copy took so the driver can log `timing/train/refit`.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from rl.generation import generate
from rl.models import build_model
from rl.workers.base import WorkerBase

__all__ = ["GenerationWorker"]


class GenerationWorker(WorkerBase):
    role = "generation"

    def __init__(self, *, name: str, rank: int, env_keys: list[str]) -> None:
        super().__init__(name=name, rank=rank, env_keys=env_keys)
        self.model: Any = None
        self.version = -1

    def setup(self, *, model_cfg: dict, vocab_size: int, seed: int, weights: dict[str, torch.Tensor]) -> None:
        self.model = build_model(model_cfg, vocab_size=vocab_size, seed=seed)
        self.model.load_state_dict(weights)
        self.model.eval()
        self.version = 0

    def load_weights(self, weights: dict[str, torch.Tensor], version: int) -> float:
        """Refit: copy the policy's weights in; returns the seconds it took."""
        t0 = time.perf_counter()
        self.model.load_state_dict(weights)
        self.version = version
        return time.perf_counter() - t0

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, *, seed: int, max_new_tokens: int, temperature: float,
                 eos_token_id: int, pad_token_id: int, **images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rollouts for [B, P] prompts; every random draw comes from a generator seeded with `seed`.
        `images`: a vision-language model's row-aligned `pixel_values` and `image_grid_thw`."""
        generator = torch.Generator().manual_seed(seed)
        gen = generate(self.model, prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature,
                       eos_token_id=eos_token_id, pad_token_id=pad_token_id, generator=generator, **images)
        return {"input_ids": gen.input_ids, "attention_mask": gen.attention_mask,
                "response_mask": gen.response_mask, "gen_logprobs": gen.gen_logprobs,
                "lengths": gen.lengths, "truncated": gen.truncated,
                "prompt_length": torch.tensor(gen.prompt_length), "version": torch.tensor(self.version)}
