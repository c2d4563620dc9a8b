"""fla's `chunk` module as the stand-in: the rule, and the backward piece fla refuses on Hopper."""

import inspect

import torch


def chunk_bwd_dqkwg(**kwargs):
    raise RuntimeError("Triton >= 3.4.0 and < 3.7.1 on Hopper GPUs produces incorrect results for gated "
                       "chunk_bwd_dqkwg (see #640)")


def _reference(q, k, v, g, beta, use_qk_l2norm_in_kernel):
    from transformers.models.qwen3_5 import modeling_qwen3_5

    rule = inspect.unwrap(modeling_qwen3_5.torch_chunk_gated_delta_rule)
    return rule(q, k, v, g=g, beta=beta, initial_state=None, output_final_state=False,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)[0]


class _Rule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, l2norm):
        ctx.save_for_backward(q, k, v, g, beta)
        ctx.l2norm = l2norm
        return _reference(q, k, v, g, beta, l2norm)

    @staticmethod
    def backward(ctx, do):
        q, k, v, g, beta = ctx.saved_tensors
        chunk_bwd_dqkwg(q=q, k=k, v=v, do=do, g=g)  # looked up in this module's globals, as fla does
        with torch.enable_grad():
            leaves = [x.detach().requires_grad_() for x in (q, k, v, g, beta)]
            out = _reference(*leaves, ctx.l2norm)
            grads = torch.autograd.grad(out, leaves, do)
        return (*grads, None)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, cu_seqlens=None):
    if initial_state is not None or output_final_state or cu_seqlens is not None:
        raise NotImplementedError("the fla stand-in runs whole sequences without state")
    return _Rule.apply(q, k, v, g, beta, use_qk_l2norm_in_kernel), None
