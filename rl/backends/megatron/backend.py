"""The megatron-core training backend: GPTModel with TP/EP/SP, megatron DDP and optimizer.

Same interface as `rl.backends.torch.TorchBackend` plus `parallel` (the recipe's
`policy.parallel`), `precision` and `distributed_optimizer`. Weights come in and go out in Hugging
Face format (`rl.backends.megatron.convert`), so the HF generation model is refit from
`state_dict()` exactly as with the torch backend.

Rows and ranks: every rank of one tensor-parallel group must get the SAME rows (they compute
one forward together); ranks of different data-parallel groups get different rows. With TP=1 and
EP>1 every rank is a data-parallel rank (experts exchange tokens inside the forward). Metrics
are summable over DP ranks: read them from ranks where `reports_metrics` is true (TP rank 0).
`state_dict()` and `optimizer_state()` are collectives: every rank must call them.

Vision-language models (`model.modality: vision`) train as GPTModel + the HF vision tower
(`rl.backends.megatron.vision`); their image columns go to `logprobs` and `train_step` as with
the torch backend.

Context parallelism (cp > 1) gathers keys and values inside attention (`rl.backends.megatron.context`);
pipeline parallelism (pp > 1) runs megatron's 1F1B schedule over the micro-batches
(`rl.backends.megatron.pipeline`). TP, CP and PP ranks of one replica get the same rows; the
reporting rank of a replica is TP rank 0, CP rank 0, last pipeline stage. Sequence packing (text
models) forwards packed rows in megatron's THD layout (`rl.backends.megatron.packed`; with cp > 1
each sequence split over the CP ranks, `rl.backends.megatron.packed_context`).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any, Callable, NamedTuple

import torch
import torch.distributed as dist

from rl.algorithms.loss import LossConfig, prev_logprobs_refusal
from rl.backends import register
from rl.backends.megatron import compile as mcomp
from rl.backends.megatron import config as mcfg
from rl.backends.megatron import convert as conv
from rl.backends.megatron import grad_sync, shims
from rl.backends.megatron import pipeline as mpipe
from rl.backends.megatron import vision as mvis
from rl.backends.megatron.input_layout import input_layouts
from rl.backends.megatron.mcore import (
    DistributedDataParallel,
    DistributedDataParallelConfig,
    Float16Module,
    GPTModel,
    MegatronOptimizerConfig,
    clear_aux_losses_tracker,
    finalize_model_grads,
    get_megatron_optimizer,
    ps,
    tensor_parallel,
)
from rl.backends.megatron.rules import MegatronRules
from rl.backends.offload import state_tensors
from rl.backends.train_step import (
    DeviceSums,
    Forward,
    PrevLogprobs,
    backward_micro_batch,
    forwards,
    micro_batch_loss,
    schedule_lr,
    train_fields,
)
from rl.cluster.ports import free_port
from rl.config import ModelConfig, ParallelConfig, PolicyConfig
from rl.data.errors import DataIntegrityError
from rl.models.image_inputs import IMAGE_FIELDS
from rl.models.packing import Packing
from rl.models.qwen3_5 import text_config
from rl.models.vision import vl_config
from rl.refit import buckets

__all__ = ["MegatronBackend"]

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


class Staged(NamedTuple):
    """One forward of a pass, ready on the device (`MegatronBackend._staged`): the model's inputs,
    its logits' map to the rows' [B, T] log-probs, the sequence length and micro-batch size (a
    pipeline's activation shape), the micro-batch's columns on the device (a train step's; {} in a
    log-prob pass) and the batch rows it holds (its first len(rows); the rest are padding copies)."""

    inputs: dict[str, Any]
    to_logprobs: Callable[[torch.Tensor], torch.Tensor]
    seq_len: int
    micro_batch_size: int
    columns: dict[str, torch.Tensor]
    rows: torch.Tensor


def _ensure_process_group() -> None:
    """A one-rank group when the caller made none (megatron needs torch.distributed)."""
    if dist.is_initialized():
        return
    port = free_port()
    backend = "gloo" if shims.on_cpu() else "nccl"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=120))


def _init_parallel(parallel: ParallelConfig, seed: int) -> None:
    if ps.model_parallel_is_initialized():
        have = (ps.get_tensor_model_parallel_world_size(), ps.get_pipeline_model_parallel_world_size(),
                ps.get_context_parallel_world_size(), ps.get_expert_model_parallel_world_size())
        want = (parallel.tp, parallel.pp, parallel.cp, parallel.ep)
        if have != want:
            raise RuntimeError(f"model parallel already initialised as (tp, pp, cp, ep)={have}, not {want}")
    else:
        world = dist.get_world_size()
        if world % (parallel.tp * parallel.pp * parallel.cp) or world % (parallel.ep * parallel.etp):
            raise ValueError(f"policy.parallel: world size {world} is not divisible by tp*pp*cp and ep*etp")
        ps.initialize_model_parallel(
            tensor_model_parallel_size=parallel.tp, pipeline_model_parallel_size=parallel.pp,
            context_parallel_size=parallel.cp, expert_model_parallel_size=parallel.ep,
            expert_tensor_parallel_size=parallel.etp)
    tensor_parallel.model_parallel_cuda_manual_seed(seed, inference_rng_tracker=shims.on_cpu())


def _use_fused_adam(optimizers: list) -> None:
    """Without Transformer Engine or Apex, megatron-core falls back to torch's AdamW in its
    multi-tensor (foreach) form; the fused kernel is one launch for all parameters. The flag is
    read at every step, so setting it on the param groups is enough."""
    for opt in optimizers:
        inner = getattr(opt, "optimizer", None)
        if isinstance(inner, torch.optim.AdamW | torch.optim.Adam):
            for group in inner.param_groups:
                group.update(fused=True, foreach=False)
            inner.defaults.update(fused=True, foreach=False)


@register("megatron")
class MegatronBackend:
    """Policy + reference + megatron optimizer on one rank of a TP x EP x DP grid.

    Built as TorchBackend is, from the `model` and `policy` sections (no `device`: the rank's
    GPU, or the CPU shims), and reads more of `policy`:
        parallel: tp, pp, cp, ep, etp, sp; dp is world / (tp*pp*cp).
        precision: "fp32" or "bf16" (bf16 params through megatron's Float16Module, fp32 main
            weights in the optimizer).
        distributed_optimizer: shard optimizer state over the data-parallel group.
        compile: GPU only: layers and log-prob under torch.compile (`rl.backends.megatron.compile`).
        activation_checkpointing: megatron's full recompute, one layer at a time (only each
            layer's input is kept for the backward).
        sequence_packing: the log-prob and training passes forward packed rows
            (`rl.backends.megatron.packed`, under cp > 1 `rl.backends.megatron.packed_context`);
            refused for a VLM and for cp > 1 with pp > 1 (rl/backends/megatron/rules.py).
    `weights` None: this rank reads its own shards from `model.path` (`rl.backends.megatron.load`).
    """

    def __init__(self, *, model: ModelConfig, policy: PolicyConfig, vocab_size: int, seed: int,
                 weights: dict[str, torch.Tensor] | None) -> None:
        self.packing = policy.sequence_packing
        precision, compile = policy.precision, policy.compile
        distributed_optimizer = policy.distributed_optimizer
        vision = model.modality == "vision"
        rules = MegatronRules()
        refusals = [*rules.policy_refusals(parallel=policy.parallel, precision=precision, compile=compile,
                                           distributed_optimizer=distributed_optimizer),
                    *rules.layout_refusals(parallel=policy.parallel, packing=self.packing.enabled,
                                           cpu=shims.on_cpu(), vision=vision, compile=compile,
                                           distributed_optimizer=distributed_optimizer)]
        if refusals:  # the preflight refused it before launch; a backend built by hand refuses it here
            raise ValueError(refusals[0])
        self.parallel = mcfg.check_parallel(policy.parallel)
        _ensure_process_group()
        _init_parallel(self.parallel, seed)
        self.vl_config = vl_config(model, vocab_size) if vision else None
        self.hf_config = self.vl_config.text_config if self.vl_config else text_config(model, vocab_size)
        self.config = mcfg.transformer_config(self.hf_config, parallel=self.parallel,
                                              params_dtype=PRECISIONS[precision],
                                              recompute=policy.activation_checkpointing)
        self.micro_batch_size = policy.micro_batch_size
        self.logprob_batch_size = policy.logprob_batch_size or policy.micro_batch_size
        self.rank = conv.ShardRank(
            tp_rank=ps.get_tensor_model_parallel_rank(), tp_size=self.parallel.tp,
            ep_rank=ps.get_expert_model_parallel_rank(), ep_size=self.parallel.ep,
            etp_rank=ps.get_expert_tensor_parallel_rank(), etp_size=self.parallel.etp)
        self.num_experts = int(getattr(self.hf_config, "num_experts", 0) or 0)
        self.first_stage, self.last_stage = ps.is_pipeline_first_stage(), ps.is_pipeline_last_stage()
        self.layer_offset, self.layer_count = mpipe.stage_layers(
            self.hf_config.num_hidden_layers, self.parallel.pp, ps.get_pipeline_model_parallel_rank())
        local, visual = self._local_weights(weights, model.path)
        self.gpt = self._build(local, visual)
        self.reference_gpt = self._build(local, visual).requires_grad_(False)
        # policy.compile: fused layers; with tp 1 the log-prob reads bf16 logits (rl.backends.megatron.compile)
        self.fused_logprobs = compile and self.parallel.tp == 1
        self.padded_layout, self.packed_layout = input_layouts(
            self.parallel, self._device, self._next_logprobs, packing=self.packing.enabled,
            position_ids=self.gpt.position_ids if self.vl_config else None)
        self._logits_kwargs = {"fp32_output": False} if self.fused_logprobs and self.config.bf16 else {}
        if compile:
            mcomp.compile_layers(self.gpt)
            mcomp.compile_layers(self.reference_gpt)
        self.model = self._wrap(self.gpt)
        self.reference = self._wrap(self.reference_gpt).eval()
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, use_distributed_optimizer=distributed_optimizer,
            overlap_grad_reduce=grad_sync.wanted(self.parallel.pp, vision=self.vl_config is not None))
        self.ddp = DistributedDataParallel(config=self.config, ddp_config=ddp_config, module=self.model)
        self.optimizer_cfg = optimizer_cfg = policy.optimizer
        self.optimizer = get_megatron_optimizer(MegatronOptimizerConfig(
            optimizer="adam", lr=optimizer_cfg.lr, weight_decay=optimizer_cfg.weight_decay,
            adam_beta1=optimizer_cfg.betas[0], adam_beta2=optimizer_cfg.betas[1],
            adam_eps=optimizer_cfg.eps, clip_grad=float(optimizer_cfg.grad_clip or 0.0),
            bf16=precision == "bf16", params_dtype=PRECISIONS[precision],
            use_distributed_optimizer=distributed_optimizer), [self.ddp])
        if not shims.on_cpu():
            _use_fused_adam(self._chained())

    # --- construction --------------------------------------------------------------------------

    def _local_weights(self, weights: dict[str, torch.Tensor] | None, path: str | None
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """This rank's GPTModel state dict and the vision tower's (VL, first stage; else {}):
        cut from the whole HF `weights`, or, when `weights` is None, read from `model.path`
        (only this rank's tensors and slices: `rl.backends.megatron.load`)."""
        if weights is not None:
            text, visual = mvis.split_hf(weights) if self.vl_config else (weights, {})
            return self._shard(text), visual if self.first_stage else {}
        if not path:
            raise ValueError("MegatronBackend: weights=None reads model.path, but model.path is not set")
        from rl.backends.megatron import load
        from rl.model_source import resolve_model_dir

        ckpt = load.SafetensorsCheckpoint(resolve_model_dir(path))
        return load.load_rank(ckpt, self.hf_config, rank=self.rank, num_experts=self.num_experts,
                                       sections=conv.gdn_sections(self.hf_config), offset=self.layer_offset,
                                       count=self.layer_count, first=self.first_stage, last=self.last_stage,
                                       vision=self.vl_config is not None)

    def _build(self, local: dict[str, torch.Tensor], visual: dict[str, torch.Tensor]) -> torch.nn.Module:
        """GPTModel (or, for a VL model, GPTModel + vision tower) holding this rank's shard `local`
        (and, on the first stage of a VL model, the tower's weights `visual`)."""
        rope = mcfg.gpt_rope_kwargs(self.hf_config)
        if self.vl_config:  # image features go in before the sequence-parallel scatter
            rope.update(scatter_embedding_sequence_parallel=False)
        kinds = list(self.hf_config.layer_types)[self.layer_offset:self.layer_offset + self.layer_count]
        gpt = GPTModel(config=self.config, transformer_layer_spec=mcfg.block_spec(self.config, kinds),
                       vocab_size=self.hf_config.vocab_size, pre_process=self.first_stage,
                       post_process=self.last_stage,
                       share_embeddings_and_output_weights=bool(self.hf_config.tie_word_embeddings), **rope)
        gpt.rotary_pos_emb = mcfg.interleaved_mrope(self.hf_config, self._device())
        result = gpt.load_state_dict(local, strict=False)
        missing = [k for k in result.missing_keys if not k.endswith("_extra_state")]
        if missing or result.unexpected_keys:
            raise DataIntegrityError(f"checkpoint does not fit the model: missing {missing}, "
                                     f"unexpected {result.unexpected_keys}")
        model: torch.nn.Module = gpt
        if self.vl_config:  # the vision tower lives on the first pipeline stage
            tower = None
            if self.first_stage:
                tower = mvis.build_vision_tower(self.vl_config)
                tower.load_state_dict(visual)
            model = mvis.VisionLanguageModel(self.config, language_model=gpt, vision_model=tower,
                                             image_token_id=self.vl_config.image_token_id,
                                             spatial_merge_size=self.vl_config.vision_config.spatial_merge_size)
        if not shims.on_cpu():
            model.cuda(torch.cuda.current_device())
        return model

    def _shard(self, hf_text: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This rank's GPTModel state dict from HF text weights (its pipeline stage, TP/EP shard)."""
        stage = mpipe.to_stage(conv.hf_to_mcore(hf_text, self.hf_config), offset=self.layer_offset,
                               count=self.layer_count, first=self.first_stage, last=self.last_stage)
        return conv.shard(stage, rank=self.rank, num_experts=self.num_experts,
                          sections=conv.gdn_sections(self.hf_config))

    def _wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.config.bf16:
            return model
        fp32_buffers = {n: b.clone() for n, b in model.named_buffers() if b.is_floating_point()}
        wrapped = Float16Module(self.config, model)
        for name, buf in model.named_buffers():  # rotary frequencies stay fp32 (as HF keeps them)
            if name in fp32_buffers:
                buf.data = fp32_buffers[name]
        return wrapped

    # --- topology (for the worker) -------------------------------------------------------------

    @property
    def dp_rank(self) -> int:
        return ps.get_data_parallel_rank()

    @property
    def dp_size(self) -> int:
        return ps.get_data_parallel_world_size()

    @property
    def reports_metrics(self) -> bool:
        """True on one rank per data-parallel replica (TP rank 0, CP rank 0, last pipeline stage: the
        one that sees logits); sum metrics over those."""
        return self.rank.tp_rank == 0 and ps.get_context_parallel_rank() == 0 and self.last_stage

    # --- log-probs -----------------------------------------------------------------------------

    def _device(self) -> torch.device:
        return torch.device("cpu") if shims.on_cpu() else torch.device("cuda", torch.cuda.current_device())

    def _next_logprobs(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Each token's fp32 log-prob of its label, from this rank's logits [B, S, V/TP]."""
        if self.fused_logprobs:
            return mcomp.compiled_next_token_logprobs(logits, labels)
        return -tensor_parallel.vocab_parallel_cross_entropy(logits.float().contiguous(), labels)

    def _forwards(self, columns: dict[str, torch.Tensor], size: int) -> list[Forward]:
        """A pass's forwards of `size` rows (`forwards`); a packed row splits evenly over TP under
        sequence parallelism."""
        multiple = self.parallel.tp if self.parallel.sp else 1
        return forwards(columns, size, self.packing, multiple=multiple)

    def _prepare(self, mb: dict[str, torch.Tensor], images: tuple[str, ...], packing: Packing | None
                 ) -> tuple[dict[str, Any], Callable[[torch.Tensor], torch.Tensor], int, int]:
        """One forward's model inputs, the map from its logits to its rows' [B, T] log-probs, and its
        sequence length and micro-batch size: the layout chosen at construction
        (rl.backends.megatron.input_layout), packed where the forward's rows were packed."""
        layout = self.padded_layout if packing is None else self.packed_layout
        return layout.prepare(mb, images, packing)

    def _staged(self, columns: dict[str, torch.Tensor], size: int, images: tuple[str, ...], *,
                loss_columns: bool) -> list[Staged]:
        """A pass's forwards of `size` rows of host `columns`, each prepared on the host and its
        inputs (with `loss_columns`, also its columns, which the loss reads) sent to the device, all
        before the first forward is queued.

        Why all first: a copy between host and device waits for the GPU (torch synchronises the
        stream after a blocking host-to-device copy; a read back waits for it by nature). Made
        between two forwards, it held the host until the GPU had drained and left the GPU idle
        while the host queued the next; made before the first, it waits for nothing of the pass."""
        dev = self._device()
        out = []
        for mb, rows, packing in self._forwards(columns, size):
            inputs, to_logprobs, seq_len, mbs = self._prepare(mb, images, packing)
            # non-blocking: no stream sync a column; from pageable memory the copy takes its source before it returns
            sent = {k: v.to(dev, non_blocking=True) for k, v in mb.items()} if loss_columns else {}
            out.append(Staged(inputs, to_logprobs, seq_len, mbs, sent, rows))
        return out

    @torch.no_grad()
    def logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                 reference: bool = False, **images: torch.Tensor) -> torch.Tensor:
        """[B, T] token log-probs under the policy (or the frozen reference); `images` are a
        vision-language model's row-aligned image columns (`IMAGE_FIELDS`). On a pipeline, real on
        the last stage and zeros (never reported) elsewhere."""
        unknown = set(images) - set(IMAGE_FIELDS)
        if unknown:
            raise DataIntegrityError(f"unknown image columns {sorted(unknown)}")
        model = self.reference if reference else self.model
        out = torch.zeros(input_ids.shape, dtype=torch.float32)
        if input_ids.shape[0] == 0:
            return out
        model.eval()
        cut = self._staged({"input_ids": input_ids, "attention_mask": attention_mask, **images},
                           self.logprob_batch_size, tuple(images), loss_columns=False)
        if self.parallel.pp > 1:
            steps = []
            for part in cut:
                def loss(logits, to_logprobs=part.to_logprobs, held=len(part.rows)):
                    lp = to_logprobs(logits)[:held]
                    return lp.new_zeros(()), torch.ones((), dtype=torch.int, device=logits.device), lp

                steps.append((lambda inputs=part.inputs: model(**inputs), loss))
            outs = mpipe.run_schedule(model, steps, forward_only=True, seq_length=cut[-1].seq_len,
                                      micro_batch_size=cut[-1].micro_batch_size)
        else:
            outs = [part.to_logprobs(model(**part.inputs, **self._logits_kwargs))[:len(part.rows)] for part in cut]
        if outs:  # one copy back for the pass (outs is empty off a pipeline's last stage)
            out[torch.cat([part.rows for part in cut])] = torch.cat(outs).cpu()
        return out

    # --- training ------------------------------------------------------------------------------

    def train_step(self, batch: dict[str, torch.Tensor], *, num_tokens: int,
                   loss_cfg: LossConfig, step: int) -> dict[str, float]:
        """One optimizer step over this rank's rows at the lr of training step `step`; metrics are
        this DP replica's share (summable), and `lr`; with `algorithm.loss.prev_logprobs: training`
        also the rows' `prev_logprobs` tensor. Between the first forward and the optimizer step
        nothing waits for the GPU (`_staged`, `DeviceSums`)."""
        fields = train_fields(loss_cfg)
        missing = [f for f in fields if f not in batch]
        if missing:
            raise DataIntegrityError(f"train batch lacks {missing}")
        self.model.train()
        self.ddp.zero_grad_buffer()
        self.optimizer.zero_grad()
        sums = DeviceSums()
        prev = PrevLogprobs(loss_cfg, batch["input_ids"].shape)
        refusal = prev_logprobs_refusal(loss_cfg, algorithm="grpo", pp=self.parallel.pp)
        if refusal:
            raise ValueError(refusal)
        if batch["input_ids"].shape[0]:
            images = tuple(f for f in IMAGE_FIELDS if f in batch)
            cut = self._staged({k: batch[k] for k in fields + images}, self.micro_batch_size, images, loss_columns=True)
            if self.parallel.pp > 1:
                self._pipeline_train(cut, num_tokens=num_tokens, loss_cfg=loss_cfg, sums=sums)
            else:
                for i, part in enumerate(cut):
                    with grad_sync.micro_batch(self.ddp, last=i == len(cut) - 1):
                        curr = part.to_logprobs(self.ddp(**part.inputs, **self._logits_kwargs))
                        backward_micro_batch(prev.fill(part.columns, part.rows, curr), len(part.rows), curr,
                                             loss_cfg=loss_cfg, num_tokens=num_tokens, sums=sums)
        grad_sync.start_remaining(self.ddp)
        finalize_model_grads([self.ddp])
        totals: dict[str, Any] = sums.floats()
        # megatron-core's own scheduler is not used: the lr is set on the param groups, which a
        # chained optimizer gathers from every optimizer it holds and its inner AdamW reads.
        totals["lr"] = schedule_lr(self.optimizer.param_groups, self.optimizer_cfg, step)
        _, grad_norm, _ = self.optimizer.step()
        clear_aux_losses_tracker()
        totals["grad_norm"] = float(grad_norm) if grad_norm is not None else float("nan")
        return {**totals, **prev.columns()}

    def _pipeline_train(self, cut: list[Staged], *, num_tokens: int, loss_cfg: LossConfig, sums: DeviceSums) -> None:
        """Forward and backward of every micro-batch through the 1F1B schedule; the last stage
        computes the loss (the same `micro_batch_loss` as without a pipeline) and its metrics."""
        steps = []
        for part in cut:
            def loss(logits, part=part):
                value, metrics = micro_batch_loss(part.columns, len(part.rows), part.to_logprobs(logits),
                                                  loss_cfg=loss_cfg, num_tokens=num_tokens)
                return value, torch.ones((), dtype=torch.int, device=logits.device), metrics

            steps.append((lambda inputs=part.inputs: self.ddp(**inputs), loss))
        for metrics in mpipe.run_schedule(self.ddp, steps, forward_only=False, seq_length=cut[-1].seq_len,
                                          micro_batch_size=cut[-1].micro_batch_size):
            sums.add(metrics)

    # --- state ---------------------------------------------------------------------------------

    def _hf_weights(self, model: torch.nn.Module, *, on_device: bool = False) -> dict[str, torch.Tensor]:
        """The whole model in HF format on every rank: gathered over TP/EP, then over the stages.
        fp32 on the CPU (checkpoints), or in the model's dtype on the device (refit: no CPU round
        trip, no fp32 copy; pipeline stages still meet on the CPU)."""
        on_device = on_device and self.parallel.pp == 1 and not shims.on_cpu()
        language, visual = model, {}
        if isinstance(model, mvis.VisionLanguageModel):
            language = model.language_model
            if model.vision_model is not None:
                visual = {k: self._export(v, on_device).clone() for k, v in model.vision_model.state_dict().items()}
        local = {k: self._export(v, on_device).to(self._device()) for k, v in language.named_parameters()}
        full = conv.gather_full(local, rank=self.rank, tp_group=ps.get_tensor_model_parallel_group(),
                                ep_group=ps.get_expert_model_parallel_group(),
                                etp_group=ps.get_expert_tensor_parallel_group(),
                                sections=conv.gdn_sections(self.hf_config))
        if not on_device:
            full = {k: v.cpu() for k, v in full.items()}
        full = mpipe.from_stage(full, offset=self.layer_offset)
        if self.parallel.pp > 1:
            stages: list = [None] * self.parallel.pp
            dist.all_gather_object(stages, (full, visual), group=ps.get_pipeline_model_parallel_group())
            full = {k: v for stage_full, _ in stages for k, v in stage_full.items()}
            visual = {k: v for _, stage_visual in stages for k, v in stage_visual.items()}
        hf = conv.mcore_to_hf(full, self.hf_config)
        if not on_device:
            hf = {k: v.cpu() for k, v in hf.items()}
        return mvis.join_hf(hf, visual) if self.vl_config else hf

    def refit_chunks(self) -> int:
        """How many chunks a streamed refit takes (`refit_chunk`); the same on every rank."""
        return len(self._refit_plan())

    def refit_chunk(self, index: int) -> dict[str, torch.Tensor]:
        """Chunk `index` of the policy in HF format: whole decoder layers (or the weights outside
        them, or the vision tower) gathered over TP/EP on the device in the training dtype (on a
        CPU: fp32 copies, as `state_dict` gives). A collective: every rank calls it with the same
        index. With pp > 1 the one chunk is the whole model, whose stages still meet on the CPU
        (`_hf_weights`)."""
        kind, names = self._refit_plan()[index]
        if kind == "whole":
            return self._hf_weights(self.gpt, on_device=True)
        on_device = not shims.on_cpu()
        if kind == "visual":
            tower = self.gpt.vision_model.state_dict()
            return mvis.join_hf({}, {k: self._export(v, on_device).clone() for k, v in tower.items()})
        params = dict(self._language().named_parameters())
        local = {k: self._export(params[k], on_device).to(self._device()) for k in names}
        full = conv.gather_full(local, rank=self.rank, tp_group=ps.get_tensor_model_parallel_group(),
                                ep_group=ps.get_expert_model_parallel_group(),
                                etp_group=ps.get_expert_tensor_parallel_group(),
                                sections=conv.gdn_sections(self.hf_config))
        layers = sorted({buckets.layer_of(k) for k in full} - {None})
        hf = conv.mcore_top_to_hf(full, self.hf_config) if not layers else {}
        for layer in layers:
            hf.update(conv.mcore_layer_to_hf(full, layer, self.hf_config))
        if not on_device:
            hf = {k: v.cpu() for k, v in hf.items()}
        return mvis.join_hf(hf, {}) if self.vl_config else hf

    def _language(self) -> torch.nn.Module:
        return self.gpt.language_model if isinstance(self.gpt, mvis.VisionLanguageModel) else self.gpt

    def _refit_plan(self) -> list[tuple[str, list[str]]]:
        """The refit's chunks, as (kind, local parameter names): "language" chunks of whole layers
        (rl.refit.buckets.chunked; the weights outside the layers first), then the vision tower's
        ("visual"), or one "whole" chunk where pp > 1. A weight's size is its shard's bytes times
        the ranks it is split over, so every rank plans the same chunks."""
        if getattr(self, "_refit_chunks", None) is None:
            p = self.parallel
            if p.pp > 1:
                self._refit_chunks = [("whole", [])]
            else:
                sizes = {k: v.numel() * v.element_size() * (p.ep * p.etp if conv.expert_weight(k) is not None else p.tp)
                         for k, v in self._language().named_parameters()}
                plan = [("language", names) for names in buckets.chunked(sizes)]
                if isinstance(self.gpt, mvis.VisionLanguageModel) and self.gpt.vision_model is not None:
                    plan.append(("visual", []))
                self._refit_chunks = plan
        return self._refit_chunks

    @staticmethod
    def _export(tensor: torch.Tensor, on_device: bool) -> torch.Tensor:
        return tensor.detach() if on_device else tensor.detach().float().cpu()

    def state_dict(self, *, on_device: bool = False) -> dict[str, torch.Tensor]:
        """HF-format policy weights: fp32 on the CPU for checkpoints, or on the device in the
        training dtype for a refit (`on_device`). A collective."""
        return self._hf_weights(self.gpt, on_device=on_device)

    def reference_state_dict(self) -> dict[str, torch.Tensor]:
        return self._hf_weights(self.reference_gpt)

    def training_state(self) -> Iterator[torch.Tensor]:
        """Every tensor `generation.offload_training` sends to host memory (rl/backends/offload.py):
        the policy's and the reference's parameters; DDP's contiguous param (distributed optimizer)
        and grad buffers, which the parameters and their `main_grad`s view; each inner optimizer's
        parameters (the fp32 main copies under bf16, the shards under the distributed optimizer)
        and its Adam state."""
        buffers = self.ddp.buffers + self.ddp.expert_parallel_buffers
        inner = [opt.optimizer for opt in self._chained() if getattr(opt, "optimizer", None) is not None]
        return state_tensors(modules=(self.ddp, self.reference), optimizers=inner,
                             extra=[t for b in buffers for t in (b.param_data, b.grad_data)])

    def optimizer_state(self) -> dict[str, Any]:
        """This rank's optimizer state on the host, a snapshot later steps do not change; reload
        it under the same parallel layout. Copied to the host tensor by tensor: a deep copy on the
        device first needs the state's size again there (a checkpoint's OOM at full width)."""
        state = {"optimizer": buckets.to_cpu(self.optimizer.state_dict(), copy=True)}
        if self.ddp.ddp_config.use_distributed_optimizer:
            state["param_state"] = [o.get_parameter_state_dp_reshardable() for o in self._chained()]
        return state

    def _chained(self) -> list:
        return list(getattr(self.optimizer, "chained_optimizers", [self.optimizer]))

    def load_state(self, *, policy: dict[str, torch.Tensor], optimizer: dict[str, Any],
                   reference: dict[str, torch.Tensor] | None = None) -> None:
        self._load_hf(self.gpt, policy)
        if reference is not None:
            self._load_hf(self.reference_gpt, reference)
        self.optimizer.load_state_dict(optimizer["optimizer"])
        for opt, param_state in zip(self._chained(), optimizer.get("param_state", [])):
            opt.load_parameter_state_from_dp_reshardable(param_state)
        if hasattr(self.optimizer, "reload_model_params"):
            self.optimizer.reload_model_params()  # bf16: refresh the fp32 main copies

    def _load_hf(self, model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
        if isinstance(model, mvis.VisionLanguageModel):
            text, visual = mvis.split_hf(weights)
            self._load_hf(model.language_model, text)
            with torch.no_grad():
                for name, param in (model.vision_model.named_parameters() if model.vision_model else ()):
                    param.copy_(visual[name])
            return
        local = self._shard(weights)
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(local[name])

