"""megatron-core, imported once, after the CPU shims: every module of this package takes
megatron-core's names from here (`from rl.backends.megatron.mcore import ps, GPTModel`).

Why: megatron-core must not be imported before `shims.apply()` on a CPU machine (it asks CUDA for
devices and streams, and one MoE module imports triton unguarded); with the import in one module,
no other module has to remember that order. Imports that must stay lazy (megatron's own modules
patched or probed by the shims, the compiled layers' helpers) stay where they are used.
"""

from __future__ import annotations

from rl.backends.megatron import shims

shims.apply()

# ruff: noqa: E402 - the shims above must run first
from megatron.core import parallel_state as ps
from megatron.core import tensor_parallel
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig, finalize_model_grads
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_submodules
from megatron.core.optimizer import OptimizerConfig as MegatronOptimizerConfig
from megatron.core.optimizer import get_megatron_optimizer
from megatron.core.packed_seq_params import PackedSeqParams
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.core.tensor_parallel.layers import set_tensor_model_parallel_attributes
from megatron.core.transformer.dot_product_attention import DotProductAttention
from megatron.core.transformer.module import Float16Module, MegatronModule
from megatron.core.transformer.moe.experts import SequentialMLP
from megatron.core.transformer.moe.moe_utils import clear_aux_losses_tracker
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_block import TransformerBlockSubmodules
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.transformer.transformer_layer import TransformerLayer

shims.portable_tensor_pickles()

__all__ = ["DistributedDataParallel", "DistributedDataParallelConfig", "DotProductAttention", "Float16Module",
           "GPTModel", "MegatronModule", "MegatronOptimizerConfig", "ModuleSpec", "PackedSeqParams", "SequentialMLP",
           "TransformerBlockSubmodules", "TransformerConfig", "TransformerLayer", "clear_aux_losses_tracker",
           "finalize_model_grads", "get_forward_backward_func", "get_gpt_layer_local_submodules",
           "get_megatron_optimizer", "ps", "set_tensor_model_parallel_attributes", "tensor_parallel"]
