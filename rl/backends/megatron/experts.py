"""Routed experts as two grouped GEMMs (`torch._grouped_mm`) instead of one small MLP per expert.

Why: without Transformer Engine, megatron-core's local spec runs experts with `SequentialMLP`: it
copies the per-expert token counts to the host (`tolist()`, a device sync), splits the tokens and
launches two GEMMs and the activation per expert, each on a sliver of the batch. `GroupedExperts`
keeps `SequentialMLP`'s parameters (the same `local_experts.{i}.linear_fc1/linear_fc2` modules, so
conversion, sharding, checkpoints, DDP and refit see the same tensors) and computes all experts
at once: the weights stacked into [E, in, out] views, one grouped GEMM for fc1, the gated
activation and router probabilities on the whole batch, one grouped GEMM for fc2. The group
boundaries stay on the device (a cumulative sum), so no sync.

`torch._grouped_mm` takes bf16 on GPUs from sm80 on and any float dtype on the CPU; other devices or
dtypes, and row widths whose stride is not a multiple of 16 bytes, use `SequentialMLP`'s loop.
"""

from __future__ import annotations

import functools

import torch

from rl.backends.megatron import shims

shims.apply()

from megatron.core.transformer.moe.experts import SequentialMLP  # noqa: E402

_STRIDE_BYTES = 16


def grouped_mm_supported(x: torch.Tensor, *widths: int) -> bool:
    """Whether `torch._grouped_mm` runs for activations like `x` and matrices of these widths.
    Under torch.compile only bf16: the op's shape function refuses other dtypes."""
    if not hasattr(torch, "_grouped_mm") or (x.dtype != torch.bfloat16 and torch.compiler.is_compiling()):
        return False
    if x.device.type == "cuda":
        if x.dtype != torch.bfloat16 or torch.cuda.get_device_capability(x.device) < (8, 0):
            return False
    elif x.device.type != "cpu":
        return False
    return all(w * x.element_size() % _STRIDE_BYTES == 0 for w in widths)


class GroupedExperts(SequentialMLP):
    """`SequentialMLP` with a grouped-GEMM forward (same parameters, same numerics up to GEMM order)."""

    def __init__(self, num_local_experts, config, submodules, pg_collection=None, name=None):
        super().__init__(num_local_experts, config, submodules, pg_collection=pg_collection, name=name)
        if (config.add_bias_linear or not config.gated_linear_unit or config.bias_activation_fusion
                or config.activation_func_clamp_value is not None):
            raise ValueError("GroupedExperts: needs an unclamped gated linear unit without biases "
                             "or fused bias-activation")

    def forward(self, permuted_local_hidden_states: torch.Tensor, tokens_per_expert: torch.Tensor,
                permuted_probs: torch.Tensor):
        x = permuted_local_hidden_states
        fc1 = [e.linear_fc1.weight for e in self.local_experts]  # [2F, H] each
        fc2 = [e.linear_fc2.weight for e in self.local_experts]  # [H, F] each
        if (self.num_local_experts == 1 or x.shape[0] == 0 or self.config.moe_apply_probs_on_input
                or self.config.fp8 or self.config.fp4
                or not grouped_mm_supported(x, x.shape[-1], fc1[0].shape[0], fc2[0].shape[1])):
            return super().forward(x, tokens_per_expert, permuted_probs)
        return grouped_glu_mlp(x, torch.stack(fc1), torch.stack(fc2), tokens_per_expert, permuted_probs,
                               self.config.activation_func, self.config.glu_linear_offset), None


def grouped_glu_mlp(x: torch.Tensor, fc1: torch.Tensor, fc2: torch.Tensor, tokens_per_expert: torch.Tensor,
                    probs: torch.Tensor, activation, linear_offset: float = 0.0) -> torch.Tensor:
    """Every expert's gated MLP on its run of rows of `x` (rows sorted by expert, counts in
    `tokens_per_expert`), scaled by the router probability, as megatron's MLP computes it:
    fc1 [E, 2F, H] (gate rows, then linear rows), fc2 [E, H, F]."""
    offsets = torch.cumsum(tokens_per_expert.to(x.device), 0, dtype=torch.int32)
    h = torch._grouped_mm(x, fc1.transpose(1, 2), offs=offsets)
    gate, linear = torch.chunk(h, 2, dim=-1)
    h = activation(gate) * (linear + linear_offset)
    h = (h * probs.unsqueeze(-1)).to(x.dtype)
    return torch._grouped_mm(h, fc2.transpose(1, 2), offs=offsets)


def with_grouped_experts(mlp_spec):
    """The MoE layer spec `mlp_spec` (megatron's partial of MoELayer) with `GroupedExperts` in
    place of `SequentialMLP`; a dense MLP spec is returned as it is."""
    submodules = getattr(mlp_spec, "keywords", {}).get("submodules")
    experts = getattr(submodules, "experts", None)
    if experts is None or getattr(experts, "func", None) is not SequentialMLP:
        return mlp_spec
    moe_submodules = type(submodules)(**{**vars(submodules),
                                         "experts": functools.partial(GroupedExperts, **experts.keywords)})
    return functools.partial(mlp_spec.func, *mlp_spec.args, **{**mlp_spec.keywords, "submodules": moe_submodules})
