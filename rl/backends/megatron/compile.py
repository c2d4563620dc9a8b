"""`policy.compile` for the megatron backend: each transformer layer, and the token log-prob, under
`torch.compile`.

Why: without Transformer Engine megatron's local layer spec runs its norms, rotary and gating as
many small kernels launched from Python, and an eager 1-GPU step is bound by the host (profile in
docs/benchmarks.md). Compiled, each layer's elementwise work fuses. The log-prob is the other
half: eager, megatron upcasts the whole [B, T, V] logits to fp32 (Float16Module's fp32 output,
then the cross-entropy's own copies); compiled with `tp == 1` it reads the bf16 logits once and
does the log-sum-exp in fp32 in one fused pass (`rl.models.logprobs.gather_logprobs`), so the model is asked for
its logits in bf16 (`fp32_output=False`).
"""

from __future__ import annotations

import sys
import types
from typing import Callable

import torch

from rl.backends.megatron import fla_ops
from rl.models.logprobs import gather_logprobs

compiled_next_token_logprobs = torch.compile(gather_logprobs, dynamic=None)


def quiet_default_tp_group() -> None:
    """megatron-core 0.19's RowParallelLinear passes `tp_group=None` on every forward, and the
    helper that fills in the default group warns (a DeprecationWarning, on rank 0). Dynamo cannot
    trace `warnings.warn`: the compiled layer broke into pieces there, and the break inside the
    layer's activation-offloading context left the rest of the layer eager (9 graphs for 2 layers,
    found with TORCH_LOGS=graph_breaks on the CPU). The same default group, without the warning."""
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import layers

    def default_tp_group(tp_group=None, is_expert=False, check_initialized=True):
        if tp_group is not None or not torch.distributed.is_initialized() or not parallel_state.is_initialized():
            return tp_group
        if is_expert:
            return parallel_state.get_expert_tensor_parallel_group(check_initialized=check_initialized)
        return parallel_state.get_tensor_model_parallel_group(check_initialized=check_initialized)

    original = layers.get_tensor_model_parallel_group_if_none
    for name, module in list(sys.modules.items()):  # every module that imported it by name
        if name.startswith("megatron.core") and getattr(module, "get_tensor_model_parallel_group_if_none",
                                                        None) is original:
            module.get_tensor_model_parallel_group_if_none = default_tp_group


def _compile_around_gated_delta_net(layer: torch.nn.Module, compiler: Callable) -> None:
    """A gated-delta-net layer compiles around its recurrence, not whole: here its input norm and
    the mixer's in/out projections (its MLP half in `compile_layers`), while the layer and mixer
    forwards (fla's Triton kernels and autograd Functions, the reshapes between them) stay eager;
    megatron already fuses the gating maths (`jit_fuser`). Whole, Dynamo splits the layer at
    fla's calls, and the compiled hybrid layout ran slower than eager: dense_1b on one H200,
    0.576 s a step whole against 0.434 s around (same call), 0.535 s eager (2026-12-01 at
    f1341d2, bench/results/train.jsonl and profile.jsonl)."""
    mixer = layer.self_attention
    for part in (layer.input_layernorm, mixer.in_proj, mixer.out_proj):
        part.forward = compiler(part.forward)


def _plain_fused_methods(mixer: torch.nn.Module) -> None:
    """megatron wraps three GatedDeltaNet methods in torch.compile (`jit_fuser`). Inside a layer
    compiled whole they would be nested compiled calls, which Dynamo (torch 2.13) calls without
    their `self`; the instance gets the plain methods, and the layer's graph fuses them anyway."""
    for name in ("_prepare_input_for_gated_delta_rule", "_compute_g_and_beta", "_apply_gated_norm"):
        plain = getattr(getattr(type(mixer), name, None), "_torchdynamo_orig_callable", None)
        if plain is not None:
            setattr(mixer, name, types.MethodType(plain, mixer))


def is_gated_delta_net(layer: torch.nn.Module) -> bool:
    return type(getattr(layer, "self_attention", None)).__name__ == "GatedDeltaNet"


def compile_layers(model: torch.nn.Module, compiler: Callable | None = None) -> int:
    """Put every transformer layer of a GPTModel (or a VL model's language model) under
    torch.compile; returns how many. The modules keep their parameters (refit and checkpoints
    see the same tensors). `compiler` wraps one callable (default `torch.compile`, dynamic=None;
    tests pass Dynamo's eager backend).

    A dense attention layer compiles whole (one graph). A gated-delta-net layer compiles around its
    recurrence (`_compile_around_gated_delta_net`) and its MLP half (norm, MLP, residual) as one
    graph: each compiled call costs host time, and the hybrid step at micro-batch 4 is host-bound.
    A MoE layer's router and token dispatcher move token counts to the host and call megatron's
    autograd Functions, which Dynamo cannot trace, so only the parts around them compile: the
    attention half (or, in a gated-delta-net layer, the parts above), the pre-MLP norm, the shared
    expert and the grouped experts (dynamic in the token count)."""
    compiler = compiler or (lambda fn: torch.compile(fn, dynamic=None))
    quiet_default_tp_group()
    language = getattr(model, "language_model", model)
    layers = language.decoder.layers
    for layer in layers:
        experts = getattr(layer.mlp, "experts", None)
        opaque = is_gated_delta_net(layer) and fla_ops.is_opaque(layer.self_attention)
        if opaque:
            _plain_fused_methods(layer.self_attention)
        gated_delta_net = is_gated_delta_net(layer) and not opaque
        if experts is None and not gated_delta_net:
            layer.forward = compiler(layer.forward)
            continue
        if gated_delta_net:
            _compile_around_gated_delta_net(layer, compiler)
        else:
            layer._forward_attention = compiler(layer._forward_attention)
        if experts is None:  # the MLP half as one graph: pre-MLP norm, MLP, residual
            layer._forward_mlp = compiler(layer._forward_mlp)
            continue
        layer.pre_mlp_layernorm.forward = compiler(layer.pre_mlp_layernorm.forward)
        experts.forward = compiler(experts.forward)
        shared = getattr(layer.mlp, "shared_experts", None)
        if shared is not None:
            shared.forward = compiler(shared.forward)
    return len(layers)
