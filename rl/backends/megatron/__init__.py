"""The megatron-core training backend, one module per job (docs/megatron.md).

`backend` holds `MegatronBackend`, registered as "megatron" (`rl.backends.get_backend`
imports it on first use). The rest: `config` (HF config -> TransformerConfig, layer spec),
`convert` (HF <-> megatron state dicts, TP/EP shards), `load` (a rank's shards from
`model.path`), `vision`, `context` (context parallelism), `pipeline`, `attention`, `experts`,
`compile` (`policy.compile`), `packed` and `packed_context` (`policy.sequence_packing`),
`input_layout` (a forward's rows as the model's inputs: text, vision, packed, packed under CP),
`rules` (what the backend can run, asked by name before launch: rl/backends/rules.py), `mcore`
(megatron-core's names, imported once after the shims), `shims` (CPU shims, the triton
stand-in), `gdn_torch` (the gated-delta-net kernels in torch) and `fla_ops` (those kernels as
custom ops).

This file imports nothing: a module that needs megatron-core takes its names from `mcore`, which
applies `shims` before the first `import megatron.core...` (megatron-core 0.19 imports triton
unguarded; see `shims`), and a module that needs none (`convert`, `load`, `compile`, `rules`) can
be imported without it.
"""


def __getattr__(name: str):
    """`hf_config_of` (rl.models.qwen3_5.text_config) stays importable from the package: the
    training anchor script, staged from outside this repository, imports it from here. Loaded on
    first use, so that importing the package still imports nothing."""
    if name == "hf_config_of":
        from rl.models.qwen3_5 import text_config

        return text_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
