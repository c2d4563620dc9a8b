"""The megatron backend's rules (rl/backends/megatron/backend.py, imported only when built): every
policy.parallel size, fp32 or bf16, a distributed optimizer and torch.compile on a GPU, packed text
rows (not under cp and pp > 1 together), no distillation step; each rank reads its own shards of
`model.path`. Imports neither torch nor megatron-core: the preflight asks it in milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rl.backends.rules import PARALLEL_SIZES, BackendRules, register_rules

if TYPE_CHECKING:
    from rl.config import RunConfig

__all__ = ["CPU_REFUSAL", "DISTRIBUTED_OPTIMIZER_CPU_REFUSAL", "MegatronRules", "packing_refusals", "shape_refusals"]

CPU_REFUSAL = "policy.compile: torch.compile of the megatron layers needs a GPU (cluster.device is cpu); set it false"
DISTRIBUTED_OPTIMIZER_CPU_REFUSAL = ("policy.distributed_optimizer: megatron-core's DistributedOptimizer accepts "
                                     "CUDA tensors only; set it false for CPU runs")


def packing_refusals(*, cp: int, pp: int, vision: bool) -> list[str]:
    """Why the megatron backend cannot pack this layout (`policy.sequence_packing.enabled`), one line
    each (rl/backends/megatron/packed.py says how it packs)."""
    out = []
    if cp > 1 and pp > 1:
        out.append(f"policy.sequence_packing.enabled with policy.parallel.cp = {cp} and pp = {pp}: under context "
                   "parallelism each forward's packed row grows to its own length (packed_context.py), and the "
                   "pipeline schedule needs one shape for all; set pp 1, cp 1 or packing false")
    if vision:
        out.append("policy.sequence_packing.enabled with model.modality: vision: the megatron backend packs text "
                   "models only (a VLM's images and M-RoPE positions would have to follow the packed order); use "
                   "policy.backend: torch, or set it false")
    return out


def shape_refusals(parallel: Any, shape: Mapping[str, Any]) -> list[str]:
    """What megatron-core refuses of this model under `parallel` (`shape`: the Hugging Face text
    config's fields): checked at construction (rl/backends/megatron/config.py) and before launch."""
    tp, pp, cp = parallel.tp, parallel.pp, parallel.cp
    out = []
    if pp > 1 and shape.get("tie_word_embeddings"):
        out.append(f"policy.parallel.pp = {pp} with model.config.tie_word_embeddings: the megatron backend pipelines "
                   "untied embeddings only (set tie_word_embeddings: false or pp: 1)")
    kv = shape.get("num_key_value_heads")
    if kv is not None and int(kv) % tp:
        out.append(f"policy.parallel.tp = {tp} does not divide model.config.num_key_value_heads = {kv} "
                   "(megatron-core needs num_query_groups % tp == 0)")
    if "linear_attention" in (shape.get("layer_types") or ()):
        for key in ("linear_num_key_heads", "linear_num_value_heads"):
            if shape.get(key) is not None and int(shape[key]) % (tp * cp):
                out.append(f"policy.parallel.tp x cp = {tp * cp} does not divide model.config.{key} = {shape[key]} "
                           "(megatron's gated delta net splits its heads over TP and CP)")
    return out


@register_rules
class MegatronRules(BackendRules):
    name = "megatron"
    implementation = "rl.backends.megatron.backend"
    requires = "megatron.core"
    requires_package = "megatron-core"
    parallel = PARALLEL_SIZES
    precisions = ("fp32", "bf16")
    distributed_optimizer = True
    compiles = True
    reads_own_weights = True

    def refusals(self, cfg: RunConfig) -> list[str]:
        p = cfg.policy
        return [*super().refusals(cfg), *self.layout_refusals(
            parallel=p.parallel, packing=p.sequence_packing.enabled, vision=cfg.model.modality == "vision",
            cpu=cfg.cluster.device == "cpu", compile=p.compile, distributed_optimizer=p.distributed_optimizer)]

    def layout_refusals(self, *, parallel: Any, packing: bool, vision: bool, cpu: bool, compile: bool,
                        distributed_optimizer: bool) -> list[str]:
        """The rules that depend on the layout and the device; the constructor asks them too."""
        out = packing_refusals(cp=parallel.cp, pp=parallel.pp, vision=vision) if packing else []
        if compile and cpu:
            out.append(CPU_REFUSAL)
        if distributed_optimizer and cpu:
            out.append(DISTRIBUTED_OPTIMIZER_CPU_REFUSAL)
        return out

    def shape_refusals(self, cfg: RunConfig, shape: Mapping[str, Any]) -> list[str]:
        return shape_refusals(cfg.policy.parallel, shape)
