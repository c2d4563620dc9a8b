"""megatron-core TransformerConfig and layer spec from a Hugging Face Qwen3.5 text config.

Mapping (HF Qwen3.5 -> megatron-core 0.19.2, local non-Transformer-Engine spec):
* GQA: num_key_value_heads -> num_query_groups; head_dim -> kv_channels.
* Attention output gate (q_proj is 2x wide, `out * sigmoid(gate)`) -> attention_output_gate.
* q_norm/k_norm -> qk_layernorm with our `ZeroCenteredRMSNorm` (HF computes
  `norm(x.float()) * (1 + w)`; megatron's torch norm wrapper refuses zero-centred gamma and
  sequence parallelism, so the spec uses our norm for every norm; weights map 1:1).
* Rotary: HF Qwen3.5 rotates by 3-axis (t, h, w) positions interleaved over the frequencies
  (M-RoPE; for text the three axes are equal, i.e. plain RoPE). GPTModel runs with
  position_embedding_type="mrope" and our `InterleavedMRoPE` in place of megatron's Qwen2-VL-style
  module, so positions are explicit per token: text, images and context-parallel slices alike.
* SwiGLU MLP -> gated_linear_unit + silu; no biases.
* MoE: num_experts, num_experts_per_tok (softmax over the top-k logits equals HF's
  softmax -> top-k -> renormalise), shared expert with its sigmoid gate, router_aux_loss_coef ->
  moe_aux_loss_coeff (aux_loss balancing).
* Linear attention (`layer_types` "linear_attention", the gated delta rule): megatron-core's
  GatedDeltaNet (megatron/core/ssm/gated_delta_net) in a TransformerLayer of its own spec:
  in_proj = [q; k; v; z; beta; alpha] (HF in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), the
  depthwise conv1d over [q; k; v], dt_bias, A_log, the gated output norm (HF RMSNormGated:
  plain, not zero-centred, weight) and out_proj. Its fla kernels have torch stand-ins
  (`shims.fla_stand_in`) where fla is missing.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from rl.backends.megatron import shims
from rl.backends.megatron.experts import with_grouped_experts
from rl.backends.megatron.mcore import (
    ModuleSpec,
    TransformerBlockSubmodules,
    TransformerConfig,
    TransformerLayer,
    get_gpt_layer_local_submodules,
)
from rl.backends.megatron.rules import shape_refusals
from rl.config import ParallelConfig
from rl.models.mrope import mrope_angles, mrope_section_of

__all__ = ["GatedOutputNorm", "InterleavedMRoPE", "ZeroCenteredRMSNorm", "block_spec", "check_parallel",
           "gpt_rope_kwargs", "transformer_config", "is_moe"]

LAYER_TYPES = ("full_attention", "linear_attention")


def check_parallel(parallel: ParallelConfig) -> ParallelConfig:
    """`parallel` (the recipe's `policy.parallel`; dp is derived from the world size) if the
    megatron backend can lay it out: every size >= 1, and sequence parallelism only with tp > 1."""
    for name in ("tp", "pp", "cp", "ep", "etp"):
        if int(getattr(parallel, name)) < 1:
            raise ValueError(f"policy.parallel.{name} must be >= 1, got {getattr(parallel, name)}")
    if parallel.sp and parallel.tp == 1:
        raise ValueError("policy.parallel.sp needs policy.parallel.tp > 1")
    return parallel


class ZeroCenteredRMSNorm(torch.nn.Module):
    """Qwen3.5's RMSNorm, `norm(x.float()) * (1 + w)` cast back to x's dtype, in megatron's norm slot.

    The weight is marked `sequence_parallel` so megatron all-reduces its gradient over the TP group
    when sequence parallelism splits the tokens.
    """

    def __init__(self, config: TransformerConfig, hidden_size: int, eps: float = 1e-6, **_: object) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.zeros(hidden_size, dtype=config.params_dtype))
        setattr(self.weight, "sequence_parallel", config.sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


class GatedOutputNorm(torch.nn.Module):
    """The gated delta net's output norm, HF's Qwen3.5 RMSNormGated without its gate (megatron
    applies `* silu(gate)` itself): `w * norm(x.float()).to(x.dtype)`, a plain (not zero-centred)
    weight, one per value-head channel, replicated over TP. Each TP rank normalises its own heads,
    so the weight's gradient is summed over the TP group (identity forward, all-reduce backward)."""

    def __init__(self, config: TransformerConfig, hidden_size: int, eps: float = 1e-6, **_: object) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from megatron.core.tensor_parallel import copy_to_tensor_model_parallel_region

        weight = copy_to_tensor_model_parallel_region(self.weight)
        xf = x.float()
        return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def is_moe(hf_config) -> bool:
    return int(getattr(hf_config, "num_experts", 0) or 0) > 0


def _check_supported(hf_config, parallel: ParallelConfig) -> None:
    unknown = sorted(set(hf_config.layer_types) - set(LAYER_TYPES))
    if unknown:
        raise ValueError(f"model.config.layer_types: the megatron backend maps {list(LAYER_TYPES)}, got {unknown}")
    refused = shape_refusals(parallel, hf_config.to_dict())  # also asked before launch (rl/preflight.py)
    if refused:
        raise ValueError(refused[0])
    if hf_config.vocab_size % parallel.tp:
        raise ValueError(f"model.config.vocab_size: {hf_config.vocab_size} must be divisible by "
                         f"policy.parallel.tp ({parallel.tp}); set model.config.vocab_size to a multiple")
    if is_moe(hf_config) and hf_config.num_experts % parallel.ep:
        raise ValueError(f"policy.parallel.ep: {parallel.ep} must divide model.config.num_experts "
                         f"({hf_config.num_experts})")
    if is_moe(hf_config) and parallel.tp > 1 and not parallel.sp:
        raise ValueError("policy.parallel.sp: megatron-core needs sequence parallelism for MoE with tp > 1")
    if hf_config.hidden_act != "silu":
        raise ValueError(f"model.config.hidden_act: only 'silu' is mapped, got {hf_config.hidden_act!r}")


def transformer_config(hf_config, *, parallel: ParallelConfig, params_dtype: torch.dtype = torch.float32,
                       recompute: bool = False) -> TransformerConfig:
    """The TransformerConfig for `hf_config` (a Qwen3_5TextConfig or Qwen3_5MoeTextConfig);
    `recompute`: full activation recompute, one layer at a time (`policy.activation_checkpointing`)."""
    _check_supported(hf_config, parallel)
    moe = is_moe(hf_config)
    fields: dict = dict(
        num_layers=hf_config.num_hidden_layers,
        hidden_size=hf_config.hidden_size,
        num_attention_heads=hf_config.num_attention_heads,
        num_query_groups=hf_config.num_key_value_heads,
        kv_channels=hf_config.head_dim,
        ffn_hidden_size=hf_config.moe_intermediate_size if moe else hf_config.intermediate_size,
        normalization="RMSNorm",
        layernorm_epsilon=hf_config.rms_norm_eps,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=bool(hf_config.attention_bias),
        qk_layernorm=True,
        attention_output_gate=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        init_method_std=hf_config.initializer_range,
        tensor_model_parallel_size=parallel.tp,
        pipeline_model_parallel_size=parallel.pp,
        context_parallel_size=parallel.cp,
        expert_model_parallel_size=parallel.ep,
        expert_tensor_parallel_size=parallel.etp,
        sequence_parallel=parallel.sp,
        params_dtype=params_dtype,
        bf16=params_dtype == torch.bfloat16,
        use_cpu_initialization=shims.on_cpu(),
        perform_initialization=False,  # weights always come from the converted HF state dict
        gradient_accumulation_fusion=False,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        apply_rope_fusion=False,
        persist_layer_norm=False,
        attention_softmax_in_fp32=True,
        # Our loss is each rank's share of the GLOBAL token mean, so DP gradients are summed,
        # not averaged (this sets megatron DDP's gradient scaling factor to 1).
        calculate_per_token_loss=True,
        mrope_section=list(mrope_section_of(hf_config)),
        linear_conv_kernel_dim=hf_config.linear_conv_kernel_dim,
        linear_key_head_dim=hf_config.linear_key_head_dim,
        linear_value_head_dim=hf_config.linear_value_head_dim,
        linear_num_key_heads=hf_config.linear_num_key_heads,
        linear_num_value_heads=hf_config.linear_num_value_heads,
        pipeline_dtype=params_dtype,
        # gloo has no coalesced (batched) p2p; NCCL does
        batch_p2p_comm=not shims.on_cpu(),
    )
    if moe:
        fields.update(
            num_moe_experts=hf_config.num_experts,
            moe_ffn_hidden_size=hf_config.moe_intermediate_size,
            moe_router_topk=hf_config.num_experts_per_tok,
            moe_router_score_function="softmax",
            moe_router_pre_softmax=False,
            moe_router_dtype="fp32",
            moe_router_load_balancing_type="aux_loss",
            moe_aux_loss_coeff=float(hf_config.router_aux_loss_coef or 0.0),
            moe_token_dispatcher_type="alltoall",
            moe_grouped_gemm=False,
        )
        if hf_config.shared_expert_intermediate_size:
            fields.update(moe_shared_expert_intermediate_size=hf_config.shared_expert_intermediate_size,
                          moe_shared_expert_gate=True)
    if recompute:
        fields.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    return TransformerConfig(**fields)


class InterleavedMRoPE(torch.nn.Module):
    """GPTModel's rotary module for Qwen3.5 (text and VL), called as `(position_ids [3, B, S],
    mrope_section)`: returns the [S, B, 1, D] angles megatron's attention applies (rotate-half
    layout). `position_ids` are this rank's tokens already (the backend slices them for context
    parallelism), so `cp_group` is not used."""

    def __init__(self, *, head_dim: int, rotary_percent: float, rotary_base: float,
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        dim = int(head_dim * rotary_percent)
        # HF's formula; a plain attribute, so bf16 casts of the model never touch it. Made on the
        # device the positions come on: a copy in the first forward would wait for the GPU there.
        self.inv_freq = 1.0 / (rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float, device=device) / dim))

    def forward(self, position_ids: torch.Tensor, mrope_section, cp_group=None) -> torch.Tensor:
        if self.inv_freq.device != position_ids.device:  # a model moved after construction: once
            self.inv_freq = self.inv_freq.to(position_ids.device)
        angles = mrope_angles(position_ids, self.inv_freq, mrope_section)
        return angles.transpose(0, 1)[:, :, None, :].contiguous()


def gpt_rope_kwargs(hf_config) -> dict:
    """GPTModel's rotary arguments (swap in `InterleavedMRoPE` after construction)."""
    rope = dict(hf_config.rope_parameters or {})
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"model.config.rope_parameters.rope_type: only 'default' is mapped, got {rope['rope_type']!r}")
    return dict(position_embedding_type="mrope", rotary_percent=float(rope.get("partial_rotary_factor", 1.0)),
                rotary_base=int(rope.get("rope_theta", 10000)),
                max_sequence_length=hf_config.max_position_embeddings)


def interleaved_mrope(hf_config, device: torch.device | str = "cpu") -> InterleavedMRoPE:
    """The rotary module of `hf_config` (HF's inverse frequencies and mrope_section) on `device`."""
    rope = dict(hf_config.rope_parameters or {})
    return InterleavedMRoPE(head_dim=hf_config.head_dim, rotary_percent=float(rope.get("partial_rotary_factor", 1.0)),
                            rotary_base=float(rope.get("rope_theta", 10000.0)), device=device)


def block_spec(config: TransformerConfig, layer_types: list[str]) -> TransformerBlockSubmodules:
    """The local (non-TE) GPT layer spec of one pipeline stage (`layer_types`: its layers), every norm
    a ZeroCenteredRMSNorm; a "linear_attention" layer has megatron's GatedDeltaNet where a
    "full_attention" layer has self-attention."""
    sub = get_gpt_layer_local_submodules(num_experts=config.num_moe_experts, moe_grouped_gemm=False,
                                         qk_layernorm=True, normalization="RMSNorm")
    sub.input_layernorm = ZeroCenteredRMSNorm
    sub.pre_mlp_layernorm = ZeroCenteredRMSNorm
    sub.mlp = with_grouped_experts(sub.mlp)
    attn = sub.self_attention.submodules
    attn.q_layernorm = ZeroCenteredRMSNorm
    attn.k_layernorm = ZeroCenteredRMSNorm
    if config.context_parallel_size > 1:
        from rl.backends.megatron.context import ContextParallelAttention

        attn.core_attention = ContextParallelAttention
    else:
        from rl.backends.megatron.attention import SDPAttention

        attn.core_attention = SDPAttention
    layers = {"full_attention": ModuleSpec(module=TransformerLayer, submodules=sub)}
    if "linear_attention" in layer_types:
        shims.fla_stand_in()
        from megatron.core.ssm.gated_delta_net import GatedDeltaNet, GatedDeltaNetSubmodules
        from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear

        linear = copy.copy(sub)
        linear.self_attention = ModuleSpec(module=GatedDeltaNet, submodules=GatedDeltaNetSubmodules(
            in_proj=ColumnParallelLinear, out_norm=GatedOutputNorm, out_proj=RowParallelLinear))
        layers["linear_attention"] = ModuleSpec(module=TransformerLayer, submodules=linear)
    if len(layer_types) * config.pipeline_model_parallel_size != config.num_layers:
        raise ValueError(f"{len(layer_types)} layer types x pp={config.pipeline_model_parallel_size} "
                         f"!= num_layers={config.num_layers}")
    shims.eager_jit_fusers()  # on CPU: after the GatedDeltaNet import above
    return TransformerBlockSubmodules(layer_specs=[layers[kind] for kind in layer_types],
                                      layer_norm=ZeroCenteredRMSNorm)
