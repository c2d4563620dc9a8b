"""The generation worker: a Ray actor that samples rollouts with a KV cache.

It holds its own copy of the policy weights and is refit before every step's rollouts;
`load_shared_chunk` / `receive_weights` report how long the copy took so the driver can log
`timing/train/refit`. On a GPU it samples on the device in the policy's precision (bf16 for a
bf16 policy) from a device generator seeded per call. A colocated refit streams chunks of whole
layers (`rl.refit.buckets`): on a GPU each is copied device to device out of its policy rank's buckets,
on the CPU it comes through the object store; a generator that is not colocated receives rank
0's buckets by broadcast over a refit channel of its own (`rl.refit.channel`: NCCL between GPUs,
gloo on the CPU). `decode`
(`rl.generation.decode_mode`) picks the loop: "graphs"/"static" sample from a
static cache (`rl.generation.static_decode`; a refit copies into the same parameter tensors, so
captured graphs stay valid), "eager" from the model's own cache. On CUDA the decode step's attention
is grouped by key/value head (`rl.generation.decode_attention`: no repeated K/V copies); the CPU
keeps sdpa's, so CPU runs and their thresholds stay as they were.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl.cluster.ports import free_port
from rl.config import ModelConfig
from rl.generation import generate
from rl.generation.attention_step import use_attention_step
from rl.generation.decode_attention import launch_by_batch, use_grouped_decode_attention
from rl.generation.fused_projections import fuse_projections
from rl.generation.gdn_decode import use_gdn_decode
from rl.generation.static_decode import MAX_SLOTS, StaticDecoder
from rl.models import build_model
from rl.refit import buckets
from rl.refit.channel import RECEIVER, RefitChannel
from rl.workers.base import WorkerBase

__all__ = ["GenerationWorker"]


class GenerationWorker(WorkerBase):
    role = "generation"

    def __init__(self, *, name: str, rank: int, env_keys: list[str], unset_env: Sequence[str] = (),
                 secret_env: Mapping[str, str] | None = None,
                 device: str = "cpu", precision: str = "fp32", decode: str = "eager",
                 decode_slots: int = MAX_SLOTS) -> None:
        super().__init__(name=name, rank=rank, env_keys=env_keys, unset_env=unset_env, secret_env=secret_env,
                         device=device)
        self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
        self.decode = decode
        self.decode_slots = decode_slots  # generation.decode_slots: the static decoder's kept shapes
        self.model: Any = None
        self.decoder: StaticDecoder | None = None
        self.version = -1
        self.channel: RefitChannel | None = None
        self._refit_seen: set[str] = set()  # the weights a streamed refit has copied so far

    def setup(self, *, model: ModelConfig, vocab_size: int, seed: int, weights: dict[str, torch.Tensor] | None) -> None:
        """Build the generation model from the recipe's `model` section; `weights` None: keep the
        checkpoint at `model.path` as `build_model` loaded it (the driver did not load it: rl/run.py
        `shard_reads`)."""
        if weights is None and not model.path:
            raise ValueError(f"{self.name}: no weights given and model.path is not set")
        self.model = build_model(model, vocab_size=vocab_size, seed=seed)
        if weights is not None:
            self.model.load_state_dict(weights)
        self.model.to(device=self.device, dtype=self.dtype)
        self.model.eval()
        if self.device == "cuda":
            use_grouped_decode_attention(self.model, flash=True)
            fuse_projections(self.model)
            use_attention_step(self.model, one_increment=True)
            use_gdn_decode(self.model)
            launch_by_batch(self.model)
        if self.decode != "eager":
            self.decoder = StaticDecoder(self.model, use_graphs=self.decode == "graphs", max_slots=self.decode_slots,
                                         fused_draw=True, fused_stats=True, draw_kernel=True)
        self.version = 0

    @torch.no_grad()
    def load_shared_chunk(self, shared: dict[str, Any], version: int, *, last: bool) -> float:
        """Streamed refit: copy one chunk of the policy's weights out of its rank's buckets
        (`rl.refit.buckets.share`); the last chunk checks every weight came and sets `version`. Returns the
        seconds it took."""
        t0 = time.perf_counter()
        params = dict(self.model.state_dict())
        weights = buckets.unpack(buckets.open_shared(shared))
        unknown = sorted(set(weights) - set(params))
        if unknown:
            raise RuntimeError(f"{self.name}: a refit chunk has {len(unknown)} weights this model lacks, "
                               f"e.g. {unknown[:3]}")
        for name, tensor in weights.items():
            params[name].copy_(tensor)
        self._refit_seen.update(weights)
        if self.device == "cuda":
            torch.cuda.synchronize()  # the trainer frees its chunk's buckets once we return
        if last:
            missing, self._refit_seen = sorted(set(params) - self._refit_seen), set()
            if missing:
                raise RuntimeError(f"{self.name}: refit lacks {len(missing)} weights, e.g. {missing[:3]}")
            self.version = version
        return time.perf_counter() - t0

    def _copy_in(self, weights: dict[str, torch.Tensor]) -> None:
        params = dict(self.model.state_dict())
        missing = sorted(set(params) - set(weights))
        if missing:
            raise RuntimeError(f"{self.name}: refit lacks {len(missing)} weights, e.g. {missing[:3]}")
        for name, target in params.items():
            target.copy_(weights[name])
        if self.device == "cuda":
            torch.cuda.synchronize()  # the trainer may free (or overwrite) its buckets once we return

    def refit_address(self) -> tuple[str, int]:
        """Where the refit channel's store will listen (this node, a free port)."""
        import ray

        host = ray.util.get_node_ip_address()
        return host, free_port(host)

    def open_refit_channel(self, address: tuple[str, int], layout: list) -> None:
        """The receiving end of the refit channel from policy rank 0 (generation not colocated)."""
        names = {slot.name for slot in layout}
        missing = sorted(set(self.model.state_dict()) - names)
        if missing:
            raise RuntimeError(f"{self.name}: the refit layout lacks {len(missing)} weights, e.g. {missing[:3]}")
        self.channel = RefitChannel.open(address, rank=RECEIVER, layout=layout, device=self.device)

    @torch.no_grad()
    def receive_weights(self, version: int) -> float:
        """Refit over the channel: policy rank 0 broadcasts, this end copies into the model;
        returns the seconds it took (the broadcast included)."""
        t0 = time.perf_counter()
        self._copy_in(self.channel.receive())
        self.version = version
        return time.perf_counter() - t0

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, *, seeds: torch.Tensor, prompt_lengths: torch.Tensor | None = None,
                 max_new_tokens: int, temperature: float, eos_token_id: int, pad_token_id: int,
                 **images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rollouts for right-padded [B, P] prompts of `prompt_lengths` tokens; row r draws from a
        generator seeded `seeds[r]`. `images`: a vision-language model's row-aligned `pixel_values`
        and `image_grid_thw`."""
        images = {k: (v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device))
                  for k, v in images.items()}
        args = dict(seeds=seeds, prompt_lengths=prompt_lengths, max_new_tokens=max_new_tokens, temperature=temperature,
                    eos_token_id=eos_token_id, pad_token_id=pad_token_id, **images)
        if self.decoder is not None:
            gen = self.decoder.generate(prompt_ids, **args)
        else:
            gen = generate(self.model, prompt_ids.to(self.device), **args)
        return buckets.to_cpu({**gen.columns(), "version": torch.tensor(self.version)})
