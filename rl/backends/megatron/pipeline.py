"""Pipeline parallelism for the megatron backend: stage layouts, stage weights, the 1F1B schedule.

Each of the `pp` stages holds `num_layers / pp` consecutive decoder layers (megatron's even
split); the first stage also holds the embedding (and a VL model's vision tower), the last the
final norm and the output layer. Micro-batches run through megatron-core's non-interleaved 1F1B
schedule (`forward_backward_pipelining_without_interleaving`), which sends activations forward
and their gradients back between neighbouring stages; only the last stage sees logits, so it
computes the log-probs and the loss and is the stage that reports.

    offset, count = stage_layers(num_layers, pp, rank)
    local = to_stage(full, offset=offset, count=count, first=..., last=...)   # weights in
    full = from_stage(local, offset=offset)                                     # weights out
    outputs = run_schedule(model, steps, forward_only=..., seq_length=..., micro_batch_size=...)
"""

from __future__ import annotations

import re
from typing import Any, Callable

import torch

from rl.backends.megatron.mcore import get_forward_backward_func

__all__ = ["from_stage", "run_schedule", "stage_layers", "to_stage"]

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")
_FIRST = ("embedding.",)
_LAST = ("decoder.final_layernorm.", "output_layer.")


def stage_layers(num_layers: int, pp_size: int, pp_rank: int) -> tuple[int, int]:
    """(first layer, number of layers) of stage `pp_rank`."""
    if num_layers % pp_size:
        raise ValueError(f"policy.parallel.pp = {pp_size} must divide model.config.num_hidden_layers ({num_layers})")
    count = num_layers // pp_size
    return pp_rank * count, count


def to_stage(full: dict[str, torch.Tensor], *, offset: int, count: int, first: bool,
             last: bool) -> dict[str, torch.Tensor]:
    """The stage's share of a full megatron dict, its layers renumbered from 0."""
    out = {}
    for name, tensor in full.items():
        match = _LAYER.match(name)
        if match:
            layer = int(match.group(1))
            if offset <= layer < offset + count:
                out[f"decoder.layers.{layer - offset}.{match.group(2)}"] = tensor
        elif (first and name.startswith(_FIRST)) or (last and name.startswith(_LAST)):
            out[name] = tensor
    return out


def from_stage(local: dict[str, torch.Tensor], *, offset: int) -> dict[str, torch.Tensor]:
    """A stage's dict under the full model's layer numbers (the inverse of `to_stage`)."""
    out = {}
    for name, tensor in local.items():
        match = _LAYER.match(name)
        out[f"decoder.layers.{int(match.group(1)) + offset}.{match.group(2)}" if match else name] = tensor
    return out


def run_schedule(model: torch.nn.Module, steps: list[tuple[Callable[[], torch.Tensor], Callable]], *,
                 forward_only: bool, seq_length: int, micro_batch_size: int) -> list[Any]:
    """Run micro-batches through the pipeline; returns, on the last stage, what each loss function
    gave as its third value (in micro-batch order), [] elsewhere.

    `steps[i]` is (forward, loss): `forward()` runs the (wrapped) model on micro-batch i and
    returns its output (logits on the last stage, activations elsewhere; the schedule has set
    the input activations); `loss(logits)` returns (loss, num_tokens, anything). The schedule
    calls backward on each loss unless `forward_only`; gradients are not finalised here.
    """
    queue = iter(steps)

    def forward_step(data_iterator, _model):
        forward, loss = next(data_iterator)
        return forward(), loss

    return get_forward_backward_func()(
        forward_step_func=forward_step, data_iterator=queue, model=[model], num_microbatches=len(steps),
        seq_length=seq_length, micro_batch_size=micro_batch_size, forward_only=forward_only)
