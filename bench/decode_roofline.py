"""The roofline of a decode step: the fewest seconds a step can take on a device, so a generation
figure reads as a fraction of what the machine allows, not only as a ratio to another decoder.

A step must read every weight once (the input embedding only its batch rows, unless it is tied to
the output projection), the key/value cache of every full-attention layer up to each row's position,
and read and write every gated-delta-net layer's recurrent state (fp32); it must do 2 FLOPs per
weight per row, plus the attention's 4 x context x query width per full-attention layer and ~6 x the
state's size per gated-delta-net layer. Its time is the larger of bytes / PEAK_HBM_TBPS and
FLOPs / PEAK_TFLOPS (rl.metrics.mfu, one named peak per device class). Over a call of `new` tokens
after a `prompt`-token prompt the mean context is prompt + (new + 1) / 2. A vision tower runs once
per prompt, not per step: its weights are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from rl.metrics.mfu import PEAK_HBM_TBPS, PEAK_TFLOPS

WEIGHT_BYTES = 2   # bf16 weights and key/value cache
STATE_BYTES = 4    # fp32 recurrent state


@dataclass(frozen=True)
class Roofline:
    bytes_per_step: float
    flops_per_step: float
    step_seconds: float       # max of the memory and the compute time
    bound: str                # "memory" or "compute"
    tokens_per_sec: float     # batch / step_seconds


def decode_roofline(model, batch: int, prompt: int, new: int, device: str) -> Roofline:
    """The roofline of `model` decoding `batch` rows; `device` is a PEAK_TFLOPS key ("h200")."""
    config = getattr(model.config, "text_config", model.config)
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    tied = output is not None and output.weight is embedding
    params = {id(p): p for name, p in model.named_parameters() if "visual" not in name}
    weights = sum(p.numel() for p in params.values())
    read_weights = weights - (0 if tied else embedding.numel() - batch * embedding.shape[1])
    matmul_weights = weights - (0 if tied else embedding.numel())

    context = prompt + (new + 1) / 2
    layer_types = list(getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers)
    full = layer_types.count("full_attention")
    linear = len(layer_types) - full
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_bytes = full * 2 * config.num_key_value_heads * head_dim * WEIGHT_BYTES * batch * context
    attention_flops = full * 4 * config.num_attention_heads * head_dim * context * batch
    state = 0
    if linear:
        state = config.linear_num_value_heads * config.linear_key_head_dim * config.linear_value_head_dim
    state_bytes = linear * 2 * state * STATE_BYTES * batch
    state_flops = linear * 6 * state * batch

    total_bytes = read_weights * WEIGHT_BYTES + kv_bytes + state_bytes
    total_flops = 2 * matmul_weights * batch + attention_flops + state_flops
    memory_s = total_bytes / (PEAK_HBM_TBPS[device] * 1e12)
    compute_s = total_flops / (PEAK_TFLOPS[device] * 1e12)
    step = max(memory_s, compute_s)
    return Roofline(bytes_per_step=total_bytes, flops_per_step=total_flops, step_seconds=step,
                    bound="memory" if memory_s >= compute_s else "compute", tokens_per_sec=batch / step)
