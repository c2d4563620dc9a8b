"""The megatron-core training backend, one module per job (docs/megatron.md).

`backend` holds `MegatronBackend`, registered as "megatron" (`rl.backends.get_backend`
imports it on first use). The rest: `config` (HF config -> TransformerConfig, layer spec),
`convert` (HF <-> megatron state dicts, TP/EP shards), `load` (a rank's shards from
`model.path`), `vision`, `context` (context parallelism), `pipeline`, `attention`, `experts`,
`compile` (`policy.compile`), `packed` and `packed_context` (`policy.sequence_packing`),
`shims` (CPU shims, the triton stand-in), `gdn_torch` (the gated-delta-net kernels in torch) and
`fla_ops` (those kernels as custom ops).

This file imports nothing: each module that needs megatron-core calls `shims.apply()` before
its first `import megatron.core...` (megatron-core 0.19 imports triton unguarded; see `shims`),
and a module that needs none (`convert`, `load`, `compile`) can be imported without it.
"""

def packing_refusals(*, cp: int, pp: int, vision: bool) -> list[str]:
    """Why the megatron backend cannot pack this layout (`policy.sequence_packing.enabled`), one line
    each; checked at construction and, before launch, by rl/preflight.py (rl/backends/megatron/packed.py
    says how it packs)."""
    out = []
    if cp > 1 and pp > 1:
        out.append(f"policy.sequence_packing.enabled with policy.parallel.cp = {cp} and pp = {pp}: under context "
                   "parallelism each forward's packed row grows to its own length (packed_context.py), and the "
                   "pipeline schedule needs one shape for all; set pp 1, cp 1 or packing false")
    if vision:
        out.append("policy.sequence_packing.enabled with model.modality: vision: the megatron backend packs text "
                   "models only (a VLM's images and M-RoPE positions would have to follow the packed order); use "
                   "policy.backend: torch, or set it false")
    return out


def __getattr__(name: str):
    """`hf_config_of` (rl.models.qwen3_5.text_config) stays importable from the package: the
    training anchor script, staged from outside this repository, imports it from here. Loaded on
    first use, so that importing the package still imports nothing."""
    if name == "hf_config_of":
        from rl.models.qwen3_5 import text_config

        return text_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
