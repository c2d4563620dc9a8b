"""On CPU, megatron-core's `jit_fuser` helpers run eagerly (`shims.eager_jit_fusers`).

Under torch.compile they were traced and compiled again in every rank process and for every new
shape: most of each CPU megatron test's and engine run's time, to fuse a few elementwise ops. The
MoE hybrid twin touches every kind (gated delta net, attention output gate, router, dispatcher):
a log-prob pass and a train step must compile no graph, and no loaded megatron class may keep a
compiled method.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from rank_processes import one_gloo_rank, run_ranks
from train_batches import train_batch

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core is not installed", allow_module_level=True)

VOCAB = 32


def _compiled_on_cpu(rank: int, port: int) -> dict:
    import sys

    from torch._dynamo.utils import counters

    from rl.algorithms.loss import LossConfig
    from rl.backends import get_backend
    from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig
    from rl.models import build_model

    one_gloo_rank(port)
    cfg = ModelConfig(family="qwen3_5_moe", config={"layer_types": ["linear_attention"] * 3 + ["full_attention"],
                                                    "router_aux_loss_coef": 0.0})
    backend = get_backend("megatron")(
        model=cfg, vocab_size=VOCAB, seed=0,
        weights=build_model(cfg, vocab_size=VOCAB, seed=0).state_dict(),
        policy=PolicyConfig(micro_batch_size=2, parallel=ParallelConfig(),
                            optimizer=OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8,
                                                      grad_clip=1.0)))
    counters.clear()
    batch = train_batch(vocab=VOCAB, seed=1, length=12)
    backend.logprobs(batch["input_ids"], batch["attention_mask"])
    backend.train_step(batch, num_tokens=int(batch["response_mask"].sum()), loss_cfg=LossConfig(), step=1)
    wrapped = sorted(f"{cls.__name__}.{name}"
                     for module_name, module in list(sys.modules.items())
                     if module_name.startswith("megatron.") and module is not None
                     for cls in vars(module).values() if isinstance(cls, type) and cls.__module__ == module_name
                     for name, value in vars(cls).items() if hasattr(value, "_torchdynamo_orig_callable"))
    return {"graphs": counters["stats"]["unique_graphs"], "wrapped": wrapped}


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU megatron's helpers stay compiled")
def test_no_megatron_helper_is_compiled_on_cpu() -> None:
    (result,) = run_ranks(_compiled_on_cpu)
    assert result == {"graphs": 0, "wrapped": []}, result
