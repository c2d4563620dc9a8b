"""The megatron-core training backend, one module per job (docs/megatron.md).

`backend` holds `MegatronBackend`, registered as "megatron" (`rl.backends.get_backend`
imports it on first use). The rest: `config` (HF config -> TransformerConfig, layer spec),
`convert` (HF <-> megatron state dicts, TP/EP shards), `load` (a rank's shards from
`model.path`), `vision`, `context` (context parallelism), `pipeline`, `attention`, `experts`,
`compile` (`policy.compile`) and `shims` (CPU shims, the triton stand-in).

This file imports nothing: each module that needs megatron-core calls `shims.apply()` before
its first `import megatron.core...` (megatron-core 0.19 imports triton unguarded; see `shims`),
and a module that needs none (`convert`, `load`, `compile`) can be imported without it.
"""

# Refused at construction and, before launch, by rl/preflight.py.
PACKING_REFUSAL = ("policy.sequence_packing.enabled: the megatron backend pads every row (packed rows would need "
                   "its THD layout and variable-length attention and gated-delta-net kernels); use policy.backend: "
                   "torch, or set it false")


def __getattr__(name: str):
    """`hf_config_of` stays importable from the package (the training anchor script imports it
    from here), loaded on first use so that importing the package still imports nothing."""
    if name == "hf_config_of":
        from rl.backends.megatron.backend import hf_config_of

        return hf_config_of
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
