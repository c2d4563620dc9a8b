"""The torch training backend: a Hugging Face model, AdamW, and a manual gloo/NCCL grad all-reduce.

Determinism is a design goal (the legacy and TQ data paths must give bitwise equal metrics):
* every forward runs on micro-batches of one fixed shape [micro_batch_size, T], short batches
  padded with copies of a real row, so a row's log-probs never depend on which other rows
  share its micro-batch or its rank; with `policy.sequence_packing` a forward is
  [micro_batch_size, max_tokens_per_row] packed rows, planned from the rows' lengths alone, so the
  same rows still give the same bits (and equal the unpacked log-probs up to float rounding);
* gradients are accumulated over micro-batches in row order and summed across ranks with one
  all-reduce of a flat buffer (2-rank float sums are order independent);
* the loss of each rank is its share of the GLOBAL token mean (the driver passes the global
  token count), so the all-reduced gradient equals the single-rank gradient.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from rl.algorithms.loss import LossConfig
from rl.backends import register
from rl.backends.offload import state_tensors
from rl.backends.torch_rules import TorchRules
from rl.backends.train_step import (
    DeviceSums,
    Forward,
    PrevLogprobs,
    backward_micro_batch,
    forwards,
    schedule_lr,
    train_fields,
)
from rl.config import ModelConfig, PolicyConfig, SequencePackingConfig
from rl.data.errors import DataIntegrityError
from rl.models import IMAGE_FIELDS, build_model, token_logprobs
from rl.models.packed_forward import packed_token_logprobs
from rl.models.packing import Packing
from rl.refit import buckets

__all__ = ["TorchBackend"]


def _cut(columns: dict[str, torch.Tensor], *, size: int, packing: SequencePackingConfig,
         device: torch.device) -> list[Forward]:
    """A pass's forwards (`forwards`), cut on the host (index arithmetic on a device tensor waits
    for the GPU), each sent to `device` once."""
    return [({k: v.to(device, non_blocking=True) for k, v in mb.items()}, rows, plan)
            for mb, rows, plan in forwards(columns, size, packing)]


def _token_logprobs(model: torch.nn.Module, mb: dict[str, torch.Tensor], packing: Packing | None,
                    images: tuple[str, ...]) -> torch.Tensor:
    extra = {f: mb[f] for f in images}
    if packing is None:
        return token_logprobs(model, mb["input_ids"], mb["attention_mask"], **extra)
    return packed_token_logprobs(model, mb["input_ids"], mb["attention_mask"], packing, **extra)


@register("torch")
class TorchBackend:
    """Policy + reference + optimizer on one data-parallel rank, built from the recipe's sections.

    Args:
        model: the recipe's `model` section.
        policy: the recipe's `policy` section: `micro_batch_size` rows per training forward,
            `logprob_batch_size` per log-prob forward (None: `micro_batch_size`; no activations
            are kept there, so it can be larger), `optimizer`, `sequence_packing` (the passes
            forward packed rows, rl/models/packed_forward.py); this backend runs data parallel in
            fp32 only and refuses the other layout and precision keys.
        vocab_size: the tokenizer's vocabulary size.
        seed: model construction seed (weights are replaced by `weights` anyway).
        weights: initial policy weights (the warm-started state dict); also the reference.
        device: "cpu" or "cuda" (the worker's one visible GPU). On CUDA the kernels are set
            deterministic, so the legacy and TQ data paths still give the same bits.
    """

    def __init__(self, *, model: ModelConfig, policy: PolicyConfig, vocab_size: int, seed: int,
                 weights: dict[str, torch.Tensor], device: str = "cpu") -> None:
        refused = TorchRules().policy_refusals(parallel=policy.parallel, precision=policy.precision,
                                               distributed_optimizer=policy.distributed_optimizer,
                                               compile=policy.compile)
        if refused:  # the preflight refused it before launch; a backend built by hand refuses it here
            raise ValueError(refused[0])
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.use_deterministic_algorithms(True, warn_only=True)
        self.model = build_model(model, vocab_size=vocab_size, seed=seed)
        self.model.load_state_dict(weights)
        self.model.to(self.device)
        for param in self.model.parameters():  # a checkpoint's tensors mapped from its file (CPU): own them,
            if not param.untyped_storage().resizable():  # so offload can free them in place
                param.data = param.data.clone()
        self.reference = copy.deepcopy(self.model).requires_grad_(False)
        if policy.activation_checkpointing:  # the policy only: the reference never runs a backward
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.micro_batch_size = policy.micro_batch_size
        self.logprob_batch_size = policy.logprob_batch_size or policy.micro_batch_size
        self.optimizer_cfg = optimizer_cfg = policy.optimizer
        self.packing = policy.sequence_packing
        self.grad_clip = optimizer_cfg.grad_clip
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=optimizer_cfg.lr, betas=tuple(optimizer_cfg.betas),
            eps=optimizer_cfg.eps, weight_decay=optimizer_cfg.weight_decay,
            fused=self.device.type == "cuda" or None)
        self.params = [p for p in self.model.parameters() if p.requires_grad]

    # --- topology (for the worker): every rank is a data-parallel rank ---------------------

    @property
    def dp_rank(self) -> int:
        return dist.get_rank() if dist.is_initialized() else 0

    @property
    def dp_size(self) -> int:
        return dist.get_world_size() if dist.is_initialized() else 1

    @property
    def reports_metrics(self) -> bool:
        return True

    # --- log-probs -----------------------------------------------------------------------

    @torch.no_grad()
    def logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                 reference: bool = False, **images: torch.Tensor) -> torch.Tensor:
        """[B, T] token log-probs under the policy (or the frozen reference); `images` are a
        vision-language model's row-aligned image columns (`IMAGE_FIELDS`)."""
        model = self.reference if reference else self.model
        out = torch.zeros(input_ids.shape, dtype=torch.float32)
        if input_ids.shape[0] == 0:
            return out
        unknown = set(images) - set(IMAGE_FIELDS)
        if unknown:
            raise DataIntegrityError(f"unknown image columns {sorted(unknown)}")
        columns = {"input_ids": input_ids, "attention_mask": attention_mask, **images}
        cut = self._forwards(columns, self.logprob_batch_size)
        outs = [_token_logprobs(model, mb, packing, tuple(images))[:len(rows)] for mb, rows, packing in cut]
        out[torch.cat([rows for _, rows, _ in cut])] = torch.cat(outs).cpu()  # one copy back, not one a forward
        return out

    def _forwards(self, columns: dict[str, torch.Tensor], size: int) -> list[Forward]:
        return _cut(columns, size=size, packing=self.packing, device=self.device)

    # --- training ------------------------------------------------------------------------

    def train_step(self, batch: dict[str, torch.Tensor], *, num_tokens: int,
                   loss_cfg: LossConfig, step: int) -> dict[str, float]:
        """One optimizer step over this rank's rows at the lr of training step `step`; metrics are
        this rank's share (summable), and `lr`; with `algorithm.loss.prev_logprobs: training` also
        the rows' `prev_logprobs` tensor."""
        fields = train_fields(loss_cfg)
        missing = [f for f in fields if f not in batch]
        if missing:
            raise DataIntegrityError(f"train batch lacks {missing}")
        self.optimizer.zero_grad(set_to_none=False)
        sums = DeviceSums()
        rows = batch["input_ids"].shape[0]
        prev = PrevLogprobs(loss_cfg, batch["input_ids"].shape)
        if rows:
            images = tuple(f for f in IMAGE_FIELDS if f in batch)
            columns = {k: batch[k] for k in fields + images}
            for mb, held, packing in self._forwards(columns, self.micro_batch_size):
                curr = _token_logprobs(self.model, mb, packing, images)
                backward_micro_batch(prev.fill(mb, held, curr), len(held), curr, loss_cfg=loss_cfg,
                                     num_tokens=num_tokens, sums=sums)
        totals: dict[str, Any] = sums.floats()
        totals["grad_norm"], totals["lr"] = self._reduce_and_step(step)
        return {**totals, **prev.columns()}

    def distill_step(self, batch: dict[str, torch.Tensor], *, teacher: Any, projection: Any, cfg: Any,
                     step: int, fold_sample_mask: bool = True) -> dict[str, float]:
        """One optimizer step of cross-tokenizer distillation from `teacher` (rl/distill/step.py) at
        the lr of training step `step`."""
        from rl.distill.step import accumulate_distill_grads

        self.optimizer.zero_grad(set_to_none=False)
        totals = accumulate_distill_grads(self.model, teacher, batch, projection=projection, cfg=cfg,
                                          micro_batch_size=self.micro_batch_size, device=self.device,
                                          fold_sample_mask=fold_sample_mask)
        totals["grad_norm"], totals["lr"] = self._reduce_and_step(step)
        return totals

    def _reduce_and_step(self, step: int) -> tuple[float, float]:
        """All-reduce, clip and step at training step `step`'s lr; (grad norm, lr)."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p, g in zip(self.params, grads):
            n = g.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n
        max_norm = self.grad_clip if self.grad_clip and self.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        lr = schedule_lr(self.optimizer.param_groups, self.optimizer_cfg, step)
        self.optimizer.step()
        return float(norm), lr

    # --- state ---------------------------------------------------------------------------

    def state_dict(self, *, on_device: bool = False) -> dict[str, torch.Tensor]:
        """The policy weights: CPU copies (checkpoints), or the live device tensors (refit)."""
        if on_device:
            return {k: v.detach() for k, v in self.model.state_dict().items()}
        return {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}

    def refit_chunks(self) -> int:
        """How many chunks a streamed refit takes (rl.refit.buckets.chunked over the policy's weights)."""
        return len(self._refit_plan())

    def refit_chunk(self, index: int) -> dict[str, torch.Tensor]:
        """Chunk `index` of the policy's weights, as `state_dict(on_device=True)` gives them
        (each rank holds the whole model: no gather)."""
        weights = self.model.state_dict()
        return {k: weights[k].detach() for k in self._refit_plan()[index]}

    def _refit_plan(self) -> list[list[str]]:
        if getattr(self, "_refit_chunks", None) is None:
            self._refit_chunks = buckets.chunked({k: v.numel() * v.element_size()
                                                for k, v in self.model.state_dict().items()})
        return self._refit_chunks

    def reference_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self.reference.state_dict().items()}

    def training_state(self) -> Iterator[torch.Tensor]:
        """Every tensor `generation.offload_training` sends to host memory (rl/backends/offload.py):
        the policy's weights and grads, the reference's weights, AdamW's state."""
        return state_tensors(modules=(self.model, self.reference), optimizers=(self.optimizer,))

    def optimizer_state(self) -> dict[str, Any]:
        """The optimizer's state on the host, a snapshot later steps do not change."""
        return buckets.to_cpu(self.optimizer.state_dict(), copy=True)

    def load_state(self, *, policy: dict[str, torch.Tensor], optimizer: dict[str, Any],
                   reference: dict[str, torch.Tensor] | None = None) -> None:
        self.model.load_state_dict(policy)
        self.optimizer.load_state_dict(optimizer)
        if reference is not None:
            self.reference.load_state_dict(reference)
