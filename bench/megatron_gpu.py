"""Train the megatron backend on GPUs without Ray: tokens/s and MFU per parallel layout.

    torchrun --nproc_per_node 2 bench/megatron_gpu.py --model dense_1b --tp 2 --out results.jsonl

Every rank builds the same random HF weights (seeded, on its GPU), hands them to
`rl.backends.megatron.backend.MegatronBackend` (the path the engine uses: HF -> megatron conversion,
TP/EP sharding, Float16Module bf16, megatron DDP + optimizer), then times `--steps` train steps
after `--warmup` steps of `--rows` rows x `--seq` tokens per data-parallel replica. FLOPs are the
engine's formula (rl.models.flops.total_flops), MFU the engine's (rl.metrics.mfu: the named dense
bf16 peak of the GPU's class, 989.5 TFLOP/s for an H200; results dated up to 2026-12-01 divided by
the 790 measured on these H200s). `--check-hf` also compares megatron log-probs with the HF model's
(fp32, before training). `bash bench/gpu.sh train|layouts` runs it (bench/README.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from rl.config import ModelConfig

# model name -> (family, HF config fields); `--layers` picks all full attention or Qwen3.5's hybrid.
MODELS: dict[str, tuple[str, dict]] = {
    "tiny": ("qwen3_5", {}),
    "tiny_moe": ("qwen3_5_moe", {}),
    "dense_1b": ("qwen3_5", dict(hidden_size=2048, num_hidden_layers=12, num_attention_heads=16,
                                 num_key_value_heads=4, head_dim=128, intermediate_size=5632,
                                 max_position_embeddings=4096, vocab_size=151936)),
    "moe_1b": ("qwen3_5_moe", dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=8,
                                   num_key_value_heads=2, head_dim=128, num_experts=16, num_experts_per_tok=4,
                                   moe_intermediate_size=512, shared_expert_intermediate_size=512,
                                   max_position_embeddings=4096, vocab_size=151936)),
    # Qwen3.5-35B-A3B's own widths (recipes/_base/qwen3_5_35b.yaml); pick the depth with --num-layers
    "qwen35_full": ("qwen3_5_moe", dict(hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                                        num_key_value_heads=2, head_dim=256, vocab_size=248320,
                                        tie_word_embeddings=False, linear_num_key_heads=16,
                                        linear_num_value_heads=32, linear_key_head_dim=128,
                                        linear_value_head_dim=128, linear_conv_kernel_dim=4, num_experts=256,
                                        num_experts_per_tok=8, moe_intermediate_size=512,
                                        shared_expert_intermediate_size=512, max_position_embeddings=8192,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000000,
                                                         "partial_rotary_factor": 0.25})),
}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="tiny")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--cp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--linear-widths", choices=["scaled", "hf"], default="scaled",
                   help="gated-delta-net widths of a hybrid layout (see model_cfg)")
    p.add_argument("--layers", choices=["full", "hybrid"], default="full",
                   help="every layer full attention, or Qwen3.5's 3 gated-delta-net : 1 attention")
    p.add_argument("--num-layers", type=int, default=None, help="override the model's depth")
    p.add_argument("--sp", action="store_true")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--distributed-optimizer", action="store_true")
    p.add_argument("--rows", type=int, default=16, help="rows per data-parallel replica per step")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--mbs", type=int, default=4)
    p.add_argument("--logprob-mbs", type=int, default=None, help="rows per log-prob forward (None: --mbs)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--check-hf", action="store_true")
    p.add_argument("--profile", default=None, help="write a torch.profiler table of one step here (rank 0)")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="policy.activation_checkpointing: recompute each layer in its backward")
    p.add_argument("--compile-layers", action="store_true",
                   help="experiment: torch.compile each transformer layer's forward")
    p.add_argument("--gdn-compile", choices=["around", "whole", "ops"], default="around",
                   help="with --compile-layers: a linear-attention layer compiled around its recurrence (the "
                        "engine's: norms, MLP, the mixer's projections), whole (Dynamo meets fla's kernels), "
                        "or whole with fla's kernels as custom ops (rl.backends.megatron.fla_ops)")
    p.add_argument("--out", default=None, help="append one JSON line per run (rank 0)")
    return p.parse_args()


def model_cfg(name: str, layers: str = "full", num_layers: int | None = None,
              linear_widths: str = "scaled") -> ModelConfig:
    """The model's config. `linear_widths` ("scaled"): a model that does not set its gated-delta-net
    widths gets Qwen3.5-35B-A3B's proportions to its attention (key width half the query width,
    value width equal to it, heads of head_dim); "hf": the HF config class's defaults (16 key and
    32 value heads of 128, which at dense_1b's width make each linear-attention mixer 2.3x the
    parameters of an attention one, where Qwen3.5-35B-A3B's is 1.2x)."""
    from rl.config import ModelConfig

    family, fields = MODELS[name]
    fields = dict(fields)
    if linear_widths == "scaled" and "linear_num_key_heads" not in fields and "num_attention_heads" in fields:
        heads, head_dim = fields["num_attention_heads"], fields["head_dim"]
        fields.update(linear_num_key_heads=heads // 2, linear_num_value_heads=heads,
                      linear_key_head_dim=head_dim, linear_value_head_dim=head_dim)
    if num_layers is not None:
        fields["num_hidden_layers"] = num_layers
    n = int(fields.get("num_hidden_layers", 4))
    fields["layer_types"] = ["full_attention" if layers == "full" or (i + 1) % 4 == 0 else "linear_attention"
                             for i in range(n)]
    return ModelConfig(family=family, config=fields)


def hf_weights(cfg: ModelConfig, vocab: int) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    from rl.models.qwen3_5 import FAMILIES, text_config

    config = text_config(cfg, vocab)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = FAMILIES[cfg.family][1](config).float().eval()
    return model, model.state_dict()


def batch(rows: int, seq: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, seq), generator=g)
    mask = torch.ones_like(ids)
    response = mask.clone()
    response[:, : seq // 4] = 0
    base = -torch.rand(rows, seq, generator=g)
    return dict(input_ids=ids, attention_mask=mask, response_mask=response, gen_logprobs=base,
                prev_logprobs=base, ref_logprobs=base, advantages=torch.randn(rows, generator=g),
                sample_mask=torch.ones(rows))


def compile_gdn_whole() -> None:
    """`--gdn-compile whole` (the A/B of the engine's choice): gated-delta-net layers compile whole,
    as attention layers do, instead of around their recurrence (rl.backends.megatron.compile)."""
    from rl.backends.megatron import compile as mcomp

    mcomp.is_gated_delta_net = lambda layer: False


def main() -> None:
    args = parse()
    if args.gdn_compile == "whole":
        compile_gdn_whole()
    elif args.gdn_compile == "ops":
        from rl.backends.megatron import shims

        shims.OPAQUE_GDN_OPS = True
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.config import OptimizerConfig, ParallelConfig, PolicyConfig
    from rl.metrics.mfu import device_class, mfu, theoretical_tflops
    from rl.models import token_logprobs
    from rl.models.flops import total_flops

    cfg = model_cfg(args.model, args.layers, args.num_layers, args.linear_widths)
    vocab = int(cfg.config.get("vocab_size", 64))
    hf, weights = hf_weights(cfg, vocab)
    t0 = time.perf_counter()
    backend = get_backend("megatron")(
        model=cfg, vocab_size=vocab, weights=weights, seed=0, policy=PolicyConfig(
            backend="megatron", micro_batch_size=args.mbs, logprob_batch_size=args.logprob_mbs,
            optimizer=OptimizerConfig(lr=1e-5, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0),
            parallel=ParallelConfig(tp=args.tp, ep=args.ep, cp=args.cp, pp=args.pp, sp=args.sp),
            precision=args.precision, distributed_optimizer=args.distributed_optimizer, compile=args.compile_layers,
            activation_checkpointing=args.activation_checkpointing))
    build_s = time.perf_counter() - t0
    data = batch(args.rows * backend.dp_size, args.seq, vocab, seed=1)
    share = slice(backend.dp_rank * args.rows, (backend.dp_rank + 1) * args.rows)
    mine = {k: v[share] for k, v in data.items()}
    hf_diff = None
    if args.check_hf:
        rows = mine["input_ids"][: args.mbs]
        with torch.no_grad():
            ref = token_logprobs(hf, rows.cuda(), torch.ones_like(rows).cuda()).cpu()
        diff = (backend.logprobs(rows, torch.ones_like(rows)) - ref).abs().max()
        diff = torch.tensor([float(diff) if backend.reports_metrics else 0.0], device="cuda")
        dist.all_reduce(diff, op=dist.ReduceOp.MAX)  # with PP only the last stage has log-probs
        hf_diff = float(diff)
    del hf, weights
    # The training peak alone: the HF model the weights came from (fp32, on the GPU) is gone.
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    num_tokens = int(data["response_mask"].sum())
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        metrics = backend.train_step(mine, num_tokens=num_tokens, loss_cfg=LossConfig(), step=step + 1)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t)
        # the step's loss: summed over the reporting ranks (one per replica; with PP the last stage)
        loss = torch.tensor([metrics["loss"] if backend.reports_metrics else 0.0], device="cuda")
        dist.all_reduce(loss)
        losses.append(float(loss))
    if args.profile and dist.get_rank() == 0:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            backend.train_step(mine, num_tokens=num_tokens, loss_cfg=LossConfig(), step=args.warmup + args.steps + 1)
            torch.cuda.synchronize()
        with open(args.profile, "w") as f:
            f.write(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=45) + "\n")
            f.write(prof.key_averages().table(sort_by="cpu_time_total", row_limit=30) + "\n")
        trace = os.path.splitext(args.profile)[0] + ".trace.json"
        prof.export_chrome_trace(trace)
        with open(trace, "rb") as f, gzip.open(trace + ".gz", "wb") as g:
            g.write(f.read())
        os.remove(trace)
    elif args.profile:
        backend.train_step(mine, num_tokens=num_tokens, loss_cfg=LossConfig(), step=args.warmup + args.steps + 1)
    # The log-prob pass GRPO runs every step (no grad), over the same rows.
    lp_times = []
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        backend.logprobs(mine["input_ids"], mine["attention_mask"])
        torch.cuda.synchronize()
        lp_times.append(time.perf_counter() - t)
    logprobs_s = sorted(lp_times)[1]
    world = dist.get_world_size()
    step_s = sorted(times)[len(times) // 2]
    tokens = args.rows * backend.dp_size * args.seq
    flops = total_flops(backend.hf_config, [args.seq] * args.rows * backend.dp_size)
    result = dict(model=args.model, layers=args.layers, linear_widths=args.linear_widths,
                  gpus=world, tp=args.tp, ep=args.ep, cp=args.cp, pp=args.pp,
                  sp=args.sp, dp=backend.dp_size,
                  precision=args.precision, distributed_optimizer=args.distributed_optimizer,
                  rows_per_dp=args.rows, seq=args.seq, mbs=args.mbs, logprob_mbs=backend.logprob_batch_size,
                  build_s=round(build_s, 2),
                  compile_layers=args.compile_layers, gdn_compile=args.gdn_compile,
                  activation_checkpointing=args.activation_checkpointing,
                  step_s=round(step_s, 4), step_s_range=[round(min(times), 4), round(max(times), 4)],
                  tokens_per_s=round(tokens / step_s),
                  logprobs_s=round(logprobs_s, 4), logprobs_tokens_per_s=round(tokens / logprobs_s),
                  tflops_per_gpu=round(flops / step_s / world / 1e12, 1),
                  mfu=round(mfu(flops, step_s, theoretical_tflops(device_class(torch.cuda.get_device_name()), world)),
                            4),
                  train_peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1),
                  num_layers=backend.hf_config.num_hidden_layers,
                  loss_first=round(losses[0], 5), loss_last=round(losses[-1], 5), hf_logprob_maxdiff=hf_diff)
    if dist.get_rank() == 0:
        print(json.dumps(result), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(result) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
