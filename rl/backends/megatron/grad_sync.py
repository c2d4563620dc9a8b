"""The data-parallel gradient reduce overlapped with the backward pass (megatron DDP's
`overlap_grad_reduce`).

Why: without it the reduce of every gradient starts after the whole backward of the step, on the
critical path. With it, megatron starts each gradient bucket's reduce as soon as that bucket's
gradients are complete in the step's last micro-batch (the earlier micro-batches run under
`no_sync`), and `finalize_model_grads` waits for them.

Megatron starts a bucket only when each of its parameters reported a gradient as often as in the
first step, and every rank must start the buckets in the same order (each start is a
collective). So the overlap is kept to models whose every parameter gets a gradient from every
micro-batch on every rank: text models (routed experts are one stacked parameter per linear, so
an expert without tokens still gets its zero gradient). A vision tower gets none on a rank whose
rows hold no image, which could start the buckets in different orders on different ranks; VL
models and pipeline stages (megatron's schedule would need its no-sync hooks) keep the plain
reduce after the backward. A step with no rows at all (every rank alike) starts its buckets in
`start_remaining`, before the finish.
"""

from __future__ import annotations

import contextlib
from typing import Any

from rl.backends.megatron.mcore import ps


def wanted(pp: int, vision: bool) -> bool:
    """Overlap where there is a reduce to overlap, a data-parallel (x context-parallel) or expert
    data-parallel group larger than one rank, in a text model on one pipeline stage."""
    if pp > 1 or vision:
        return False
    return (ps.get_data_parallel_world_size(with_context_parallel=True) > 1
            or ps.get_expert_data_parallel_world_size() > 1)


def micro_batch(ddp: Any, last: bool) -> contextlib.AbstractContextManager:
    """The context one micro-batch's forward and backward run in: gradients only accumulate,
    except in the step's last micro-batch, whose backward starts the reduce bucket by bucket."""
    return contextlib.nullcontext() if last else ddp.no_sync()


def start_remaining(ddp: Any) -> None:
    """Start the reduce of every bucket the backward did not start (a step without rows)."""
    if not ddp.ddp_config.overlap_grad_reduce:
        return
    for group in ddp.bucket_groups + ddp.expert_parallel_bucket_groups:
        if not group.is_first_batch and group.grad_reduce_handle is None and not group.grad_reduce_finished:
            group.start_grad_sync()
