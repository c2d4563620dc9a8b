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


def hf_config_of(model, vocab_size: int):
    """rl.models.hf_configs.text_config for a caller outside this repository: the training anchor
    script (staged by bench/stage_gpu.sh) imports it from here and passes the recipe's `model`
    section as a plain mapping ({"family": ..., "config": {...}}), so a mapping is made a
    `ModelConfig` first. Imported on call, so that importing the package still imports nothing."""
    from collections.abc import Mapping

    from rl.config import ModelConfig
    from rl.models.hf_configs import text_config

    return text_config(ModelConfig(**model) if isinstance(model, Mapping) else model, vocab_size)
