"""Padding against rows alone: does a right-padded batch of mixed lengths train as its rows would?

    torchrun --standalone --nproc_per_node 1 bench/padding_grads.py [--precision bf16] [--out FILE]

The megatron backend (the engine's training path) reads log-probs and takes one train step on a
batch of rows of different lengths, right-padded to the longest, and then on each row alone (no
padding at all). Every step is the first of a one-step warm-up from lr 0 (`warmup_init_lr`; the
lr must be positive), so the weights never move and the padded batch's gradients (`main_grad`)
must equal the sum of the rows' own gradients, and its log-probs each row's own, up to the
arithmetic's rounding. The same comparison on a batch whose rows share one length (no padding,
only other GEMM shapes) measures that rounding: the figure to read is the mixed batch's error
against it. Models: the one-H200 LLM twin's (recipes/_base/qwen3_5_35b.yaml, `h200x1`: Qwen3.5-MoE,
3 gated-delta-net layers then one attention layer, twice) and its all-attention control. On a GPU
the gated-delta-net layers run fla's kernels; on a CPU the torch stand-ins (and rank 0 over gloo).
One JSON line per model, precision and batch: `lp_max_abs` (the worst log-prob), `grad_rel` (the
norm of all gradients' difference over the norm of the rows' sum) and the worst parameter's own
relative error.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import yaml

if TYPE_CHECKING:
    from rl.config import ModelConfig

BASE = Path(__file__).resolve().parents[1] / "recipes" / "_base" / "qwen3_5_35b.yaml"
VOCAB = 64
# name -> (row lengths, prompt tokens of each). mixed: the twin's own shape (prompts of 4-12 tokens
# and 4 answer tokens) and rows that cross fla's 64-token chunks; equal: as many rows at one length
# (no padding: the rounding's control).
BATCHES = {"mixed_short": ([8, 16, 10, 13, 9, 16, 11, 14], 4), "equal_short": ([16] * 8, 4),
           "mixed_long": ([40, 150, 70, 129, 65, 100, 33, 150], 20), "equal_long": ([150] * 8, 20)}


def twin_config(layers: str) -> ModelConfig:
    """The one-H200 LLM twin's model (`h200x1` of the base recipe), its router aux loss off (it
    counts the padding tokens' routing); `layers: full` makes every layer full attention."""
    from rl.config import ModelConfig

    fields = dict(yaml.safe_load(BASE.read_text())["h200x1"]["model.config"])
    fields["router_aux_loss_coef"] = 0.0
    if layers == "full":
        fields["layer_types"] = ["full_attention"] * len(fields["layer_types"])
    return ModelConfig(family="qwen3_5_moe", config=fields)


def rows_of(lengths: list[int], prompt: int, seed: int) -> dict[str, torch.Tensor]:
    """Right-padded rows of `lengths` tokens, the first `prompt` of each a prompt, the rest scored."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    response = mask.clone()
    response[:, :prompt] = 0
    base = (-torch.rand(len(lengths), width, generator=g) * 0.1 - 2.0) * mask
    return dict(input_ids=torch.randint(1, VOCAB, (len(lengths), width), generator=g) * mask, attention_mask=mask,
                response_mask=response, gen_logprobs=base, prev_logprobs=base, ref_logprobs=base,
                advantages=torch.randn(len(lengths), generator=g), sample_mask=torch.ones(len(lengths)))


def alone(batch: dict[str, torch.Tensor], i: int) -> dict[str, torch.Tensor]:
    """Row i without its padding."""
    n = int(batch["attention_mask"][i].sum())
    return {k: (v[i:i + 1, :n] if v.dim() == 2 else v[i:i + 1]) for k, v in batch.items()}


def assert_lr_zero(metrics: dict[str, float]) -> None:
    """The step took lr 0: the weights the next comparison reads are the ones this one read."""
    assert metrics["lr"] == 0.0, f"the bench's steps must not move the weights, took lr {metrics['lr']}"


def compare(backend, batch: dict[str, torch.Tensor], loss_cfg) -> dict[str, float]:
    num_tokens = int(batch["response_mask"].sum())

    def grads() -> dict[str, torch.Tensor]:
        return {n: p.main_grad.detach().float().clone() for n, p in backend.gpt.named_parameters()}

    lp = backend.logprobs(batch["input_ids"], batch["attention_mask"])
    assert_lr_zero(backend.train_step(batch, num_tokens=num_tokens, loss_cfg=loss_cfg, step=1))
    padded = grads()
    summed = {n: torch.zeros_like(g) for n, g in padded.items()}
    lp_err = 0.0
    for i in range(batch["input_ids"].shape[0]):
        row = alone(batch, i)
        own = backend.logprobs(row["input_ids"], row["attention_mask"])
        lp_err = max(lp_err, float((lp[i, : own.shape[1]] - own[0]).abs().max()))
        assert_lr_zero(backend.train_step(row, num_tokens=num_tokens, loss_cfg=loss_cfg, step=1))
        for n, g in grads().items():
            summed[n] += g
    diff = sum(float((padded[n] - summed[n]).norm() ** 2) for n in padded) ** 0.5
    norm = sum(float(summed[n].norm() ** 2) for n in summed) ** 0.5
    worst = max(padded, key=lambda n: float((padded[n] - summed[n]).norm() / (summed[n].norm() + 1e-30)))
    return {"lp_max_abs": lp_err, "grad_rel": diff / norm,
            "worst_param": worst,
            "worst_param_rel": float((padded[worst] - summed[worst]).norm() / (summed[worst].norm() + 1e-30))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", choices=["fp32", "bf16"], nargs="+", default=["fp32", "bf16"])
    p.add_argument("--batches", nargs="+", choices=sorted(BATCHES), default=sorted(BATCHES))
    p.add_argument("--out", help="append the JSON lines here too")
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    else:
        from rl.backends.megatron import shims

        shims.apply()
    dist.init_process_group("nccl" if cuda else "gloo")
    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.config import OptimizerConfig, PolicyConfig
    from rl.models import build_model

    # Step 1 of a warm-up trains at warmup_init_lr: every train_step below is a step 1 (`compare`).
    still = OptimizerConfig(lr=1e-5, warmup_steps=1, warmup_init_lr=0.0, weight_decay=0.0, betas=[0.9, 0.999],
                            eps=1e-8, grad_clip=None)
    for layers in ("hybrid", "full"):
        cfg = twin_config(layers)
        weights = build_model(cfg, vocab_size=VOCAB, seed=0).state_dict()
        for precision in args.precision:
            policy = PolicyConfig(backend="megatron", optimizer=still, micro_batch_size=8, precision=precision)
            backend = get_backend("megatron")(model=cfg, policy=policy, vocab_size=VOCAB,
                                              weights=weights, seed=0)
            for name in args.batches:
                lengths, prompt = BATCHES[name]
                row = {"device": torch.cuda.get_device_name() if cuda else "cpu", "layers": layers,
                       "precision": precision, "batch": name, "lengths": lengths,
                       **compare(backend, rows_of(lengths, prompt, seed=1), LossConfig())}
                line = json.dumps(row)
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(line + "\n")
            del backend
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
