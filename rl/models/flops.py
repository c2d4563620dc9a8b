"""Model FLOPs of one training step, from the model config and unpadded sequence lengths.

For one sample of L tokens (prompt + response), forward + backward (3x a forward, 2 FLOPs
per multiply-add), with n layers, hidden h, q = heads * head_dim, k = kv_heads * head_dim,
MLP width f and vocabulary V (the reference's formula, REFERENCE.md):

    attention  6 L (n (2qh + 2kh) + n_full L q)
    mlp        18 n L h f        (gate, up, down: 3 GEMMs of h x f)
    vocab      6 L h V           (the LM head)

The quadratic `L q` term is causal (QK^T and AV, halved). FLOPs depend only on the config and
L, never on padding, so any process can recompute a step's FLOPs from sequence lengths alone
(the data plane's `_dp_post_train` does, from each shard's `sequence_lengths`).

How the Qwen3.5 hybrid stack is counted (a deliberate first version, stated so it can be
compared): Qwen3.5 interleaves gated-delta-rule LINEAR-attention layers with FULL-attention
layers (by default every 4th). Every layer is charged the full-attention projection GEMMs
`2qh + 2kh` (as the reference's formula does for all layers), but only the full-attention
layers (n_full) are charged the quadratic `L q` term; the linear layers' recurrence is linear
in L and small next to the GEMMs, so it is not counted. Not counted either: the output gate
half of Qwen3.5's gated q_proj, the MoE router (h x num_experts), norms, rotary, the conv1d.

MoE: f = moe_intermediate_size * num_experts_per_tok + shared_expert_intermediate_size (only
the experts a token is routed to do work).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rl.metrics.mfu import PEAK_TFLOPS, mfu, theoretical_tflops

__all__ = [
    "FlopsConfig",
    "PEAK_TFLOPS",
    "flops_per_sample",
    "mfu",
    "theoretical_tflops",
    "total_flops",
]

_MISSING = object()


def _field(cfg: Any, name: str, default: Any = _MISSING) -> Any:
    """`cfg.name` or `cfg[name]`, for HF config objects and plain dicts alike."""
    value = cfg.get(name, default) if isinstance(cfg, Mapping) else getattr(cfg, name, default)
    if value is _MISSING:
        raise ValueError(f"model.config: {name} is needed to count FLOPs")
    return value


@dataclass(kw_only=True, frozen=True)
class FlopsConfig:
    """The shapes the FLOPs formula needs (see the module docstring)."""

    num_layers: int
    hidden_size: int
    q_dim: int
    kv_dim: int
    ffn_dim: int
    vocab_size: int
    num_full_attention_layers: int

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden_size", "q_dim", "kv_dim", "ffn_dim", "vocab_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"FlopsConfig.{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.num_full_attention_layers <= self.num_layers:
            raise ValueError(
                f"FlopsConfig.num_full_attention_layers must be in [0, {self.num_layers}], "
                f"got {self.num_full_attention_layers}"
            )

    @classmethod
    def from_hf_config(cls, cfg: Any) -> FlopsConfig:
        """Read a Hugging Face config (object or dict): Qwen3.5 dense or MoE, or any Qwen3-style one.

        A multimodal config's `text_config` is used. The full-attention layer count comes from
        `layer_types` (every entry other than `linear_attention` counts as full attention);
        a dict without `layer_types` that has linear-attention fields gets Qwen3.5's default
        pattern (every `full_attention_interval`-th layer, default 4), otherwise all layers
        are full attention.
        """
        text = _field(cfg, "text_config", None)
        if text is not None:
            cfg = text
        n = int(_field(cfg, "num_hidden_layers"))
        h = int(_field(cfg, "hidden_size"))
        heads = int(_field(cfg, "num_attention_heads"))
        kv_heads = int(_field(cfg, "num_key_value_heads", None) or heads)
        head_dim = int(_field(cfg, "head_dim", None) or h // heads)
        experts_per_tok = _field(cfg, "num_experts_per_tok", None)
        if experts_per_tok:
            ffn = int(_field(cfg, "moe_intermediate_size")) * int(experts_per_tok)
            ffn += int(_field(cfg, "shared_expert_intermediate_size", None) or 0)
        else:
            ffn = int(_field(cfg, "intermediate_size"))
        return cls(
            num_layers=n,
            hidden_size=h,
            q_dim=heads * head_dim,
            kv_dim=kv_heads * head_dim,
            ffn_dim=ffn,
            vocab_size=int(_field(cfg, "vocab_size")),
            num_full_attention_layers=_count_full_attention(cfg, n),
        )


def _count_full_attention(cfg: Any, num_layers: int) -> int:
    layer_types = _field(cfg, "layer_types", None)
    if layer_types is not None:
        if len(layer_types) != num_layers:
            raise ValueError(
                f"model.config.layer_types has {len(layer_types)} entries for "
                f"num_hidden_layers={num_layers}"
            )
        return sum(1 for t in layer_types if t != "linear_attention")
    if _field(cfg, "linear_num_key_heads", None) is not None:
        interval = int(_field(cfg, "full_attention_interval", None) or 4)
        return num_layers // interval
    return num_layers


def _as_flops_config(cfg: Any) -> FlopsConfig:
    return cfg if isinstance(cfg, FlopsConfig) else FlopsConfig.from_hf_config(cfg)


def _per_sample(c: FlopsConfig, seq_len: int) -> int:
    if isinstance(seq_len, bool) or int(seq_len) != seq_len or seq_len < 0:
        raise ValueError(f"sequence length must be a non-negative integer, got {seq_len!r}")
    L, h, q, k = int(seq_len), c.hidden_size, c.q_dim, c.kv_dim
    attention = 6 * L * (c.num_layers * (2 * q * h + 2 * k * h) + c.num_full_attention_layers * L * q)
    mlp = 18 * c.num_layers * L * h * c.ffn_dim
    vocab = 6 * L * h * c.vocab_size
    return attention + mlp + vocab


def flops_per_sample(cfg: FlopsConfig | Any, seq_len: int) -> int:
    """Training FLOPs (forward + backward) of one sample of `seq_len` unpadded tokens.

    Args:
        cfg: a `FlopsConfig`, or a Hugging Face config object or dict (see `from_hf_config`).
        seq_len: prompt + response tokens, without padding.
    """
    return _per_sample(_as_flops_config(cfg), seq_len)


def total_flops(cfg: FlopsConfig | Any, seq_lens: Iterable[int]) -> int:
    """Sum of `flops_per_sample` over the samples of a step (any order, any sharding)."""
    c = _as_flops_config(cfg)
    # Tensor elements and numpy scalars are unwrapped so the integer check still applies.
    return sum(_per_sample(c, L.item() if hasattr(L, "item") else L) for L in seq_lens)
