"""Routed experts as two stacked parameters and two grouped GEMMs (`torch._grouped_mm`).

Why: megatron-core's local `SequentialMLP` holds one small MLP per expert. Each step then pays
per expert: a host sync for the token counts (`tolist()`), two GEMMs and the activation on a
sliver of the batch, and, for every expert linear, a gradient-accumulation hook in megatron's DDP
(16 experts: 32 parameters and 32 `add_` per layer and micro-batch; a stack of the weights if the
GEMMs are grouped). `GroupedExperts` holds each linear of all local experts as ONE parameter,
`fc1` [E_local, 2F, H] (per expert [gate; up] rows) and `fc2` [E_local, H, F] (F: the expert-TP
rank's share of the FFN width) - the layout of HF's `gate_up_proj` / `down_proj`
(`rl.backends.megatron.convert.EXPERT_WEIGHTS`) and `[E, out, in]`, which `torch._grouped_mm`
reads through a transposed view without a copy. The forward is one grouped GEMM for fc1, the
gated activation and router probabilities on the whole batch, one grouped GEMM for fc2; the
group boundaries stay on the device (a cumulative sum), so no sync.

`torch._grouped_mm` takes bf16 on GPUs from sm80 on and any float dtype on the CPU; other devices
or dtypes, and row widths whose stride is not a multiple of 16 bytes, loop over the experts'
slices of the same two parameters (`looped_glu_mlp`).
"""

from __future__ import annotations

import functools

import torch

from rl.backends.megatron.mcore import MegatronModule, SequentialMLP, set_tensor_model_parallel_attributes

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


class GroupedExperts(MegatronModule):
    """The local experts of a MoE layer (megatron's experts interface: `forward(x, tokens_per_expert,
    probs) -> (out, None)`), as two stacked parameters.

    The parameters carry what megatron's expert linears carry: `allreduce` False when they reduce
    over the expert-data-parallel group (expert parallelism, or expert-TP unlike TP), and the
    tensor-parallel attributes (fc1 split in its rows, fc2 in its columns, over expert-TP).
    Expert-TP needs no communication here: the token dispatcher gathers the tokens and reduces
    fc2's partial sums, as for `SequentialMLP`."""

    def __init__(self, num_local_experts: int, config, pg_collection=None, name=None):
        super().__init__(config=config)
        if (config.add_bias_linear or not config.gated_linear_unit or config.bias_activation_fusion
                or config.activation_func_clamp_value is not None or config.moe_apply_probs_on_input
                or config.fp8 or config.fp4):
            raise ValueError("GroupedExperts: needs an unclamped gated linear unit without biases, fused "
                             "bias-activation, probabilities on the input or fp8/fp4")
        if config.perform_initialization:
            raise ValueError("GroupedExperts: the weights come from a checkpoint (perform_initialization=False)")
        self.num_local_experts = num_local_experts
        ffn = config.moe_ffn_hidden_size // config.expert_tensor_parallel_size
        device = "cpu" if config.use_cpu_initialization else torch.cuda.current_device()

        def weight(*shape: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.empty(num_local_experts, *shape, dtype=config.params_dtype, device=device))

        self.fc1 = weight(2 * ffn, config.hidden_size)
        self.fc2 = weight(config.hidden_size, ffn)
        expert_groups = (config.expert_model_parallel_size > 1
                         or config.expert_tensor_parallel_size != config.tensor_model_parallel_size)
        for param, dim in ((self.fc1, 1), (self.fc2, 2)):
            set_tensor_model_parallel_attributes(param, is_parallel=True, dim=dim, stride=1)
            param.allreduce = not expert_groups

    def forward(self, permuted_local_hidden_states: torch.Tensor, tokens_per_expert: torch.Tensor,
                permuted_probs: torch.Tensor):
        x = permuted_local_hidden_states
        grouped = x.shape[0] > 0 and grouped_mm_supported(x, x.shape[-1], self.fc1.shape[1], self.fc2.shape[2])
        mlp = grouped_glu_mlp if grouped else looped_glu_mlp
        return mlp(x, self.fc1, self.fc2, tokens_per_expert, permuted_probs,
                   self.config.activation_func, self.config.glu_linear_offset), None


def _glu(h: torch.Tensor, probs: torch.Tensor, activation, linear_offset: float, dtype: torch.dtype) -> torch.Tensor:
    """megatron's MLP between its linears: activation(gate) * (linear + offset), times the router
    probability, cast back to the activations' dtype."""
    gate, linear = torch.chunk(h, 2, dim=-1)
    return (activation(gate) * (linear + linear_offset) * probs.unsqueeze(-1)).to(dtype)


def grouped_glu_mlp(x: torch.Tensor, fc1: torch.Tensor, fc2: torch.Tensor, tokens_per_expert: torch.Tensor,
                    probs: torch.Tensor, activation, linear_offset: float = 0.0) -> torch.Tensor:
    """Every expert's gated MLP on its run of rows of `x` (rows sorted by expert, counts in
    `tokens_per_expert`), scaled by the router probability, as megatron's MLP computes it:
    fc1 [E, 2F, H] (gate rows, then linear rows), fc2 [E, H, F]."""
    offsets = torch.cumsum(tokens_per_expert.to(x.device), 0, dtype=torch.int32)
    h = _glu(torch._grouped_mm(x, fc1.transpose(1, 2), offs=offsets), probs, activation, linear_offset, x.dtype)
    return torch._grouped_mm(h, fc2.transpose(1, 2), offs=offsets)


def looped_glu_mlp(x: torch.Tensor, fc1: torch.Tensor, fc2: torch.Tensor, tokens_per_expert: torch.Tensor,
                   probs: torch.Tensor, activation, linear_offset: float = 0.0) -> torch.Tensor:
    """`grouped_glu_mlp` one expert at a time, on slices of the same stacked weights (the token
    counts go to the host)."""
    counts = tokens_per_expert.tolist()
    rows = zip(torch.split(x, counts), torch.split(probs, counts), fc1, fc2)
    return torch.cat([torch.nn.functional.linear(_glu(torch.nn.functional.linear(xe, w1), pe, activation,
                                                      linear_offset, x.dtype), w2)
                      for xe, pe, w1, w2 in rows])


def with_grouped_experts(mlp_spec):
    """The MoE layer spec `mlp_spec` (megatron's partial of MoELayer) with `GroupedExperts` in
    place of `SequentialMLP`; a dense MLP spec is returned as it is."""
    submodules = getattr(mlp_spec, "keywords", {}).get("submodules")
    experts = getattr(submodules, "experts", None)
    if experts is None or getattr(experts, "func", None) is not SequentialMLP:
        return mlp_spec
    moe_submodules = type(submodules)(**{**vars(submodules), "experts": GroupedExperts})
    return functools.partial(mlp_spec.func, *mlp_spec.args, **{**mlp_spec.keywords, "submodules": moe_submodules})
