"""Typed view of a resolved recipe (docs/architecture.md, "The recipe"): the one description of it.

Each field carries its key's doc, choices and bounds (rl/recipe/key.py); `python -m rl.recipe`
writes the harness's JSON Schema and the key tables of docs/recipes.md from them. The engine can
also be run by hand, so it checks here too: each section its own values when built, `RunConfig`
the rules across sections; unknown keys are a `ValueError` that names the key and lists the valid
ones. Over 600 lines because each key's doc lives on its field.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rl.algorithms.loss_config import LossConfig  # the loss section is the loss's own config
from rl.backends.names import backend_names  # policy.backend's choices
from rl.distill.config import DistillConfig  # so is the distillation section
from rl.recipe import secret_env, unsafe_env
from rl.recipe.key import Section, key, section
from rl.recipe.read import build

__all__ = [
    "AlgorithmConfig",
    "CheckpointConfig",
    "ClusterConfig",
    "DataConfig",
    "DataSourceConfig",
    "DataPlaneConfig",
    "GenerationConfig",
    "ModelConfig",
    "OptimizerConfig",
    "ParallelConfig",
    "PolicyConfig",
    "RunConfig",
    "SequencePackingConfig",
    "TaskConfig",
    "TeacherConfig",
    "WarmStartConfig",
    "load_config",
    "parse_config",
    "read_recipe",
    "resolved_config",
]


@dataclass(kw_only=True)
class ModelConfig(Section):
    family: str = key("qwen3_5", choices=('qwen3_5', 'qwen3_5_moe'), required=True, doc=(
        'architecture class (dense or MoE)'))
    modality: str = key("text", choices=('text', 'vision'))
    path: str | None = key(None, json={'minLength': 1, 'format': 'printable'}, doc=(
        'a checkpoint loaded with `from_pretrained`: a shipped tiny one (a name without `/`, '
        '`rl/assets/checkpoints/`), a local Hugging Face directory (safetensors, sharded or not),'
        ' or an `org/name` Hub id read from the local Hugging Face cache (never downloaded: `hf '
        'download` it where there is network); null: build from `model.config`'))
    config: dict[str, Any] = key({}, doc=(
        "fields of the family's Hugging Face config class (free map; the engine refuses any other"
        " field); with `model.path`, they override the checkpoint's"))
    tokenizer: str | None = key("arith", required=True, json={'minLength': 1, 'format': 'printable'}, doc=(
        'a tokenizer shipped in `rl/assets/tokenizers/`, or a path (contains `/`); null: the '
        'tokenizer and chat template of `model.path`'))


@dataclass(kw_only=True)
class ClusterConfig(Section):
    nodes: int = key(1, ge=1)
    devices_per_node: int = key(1, ge=1, required=True, doc=(
        'GPUs per node, or CPU ranks when `cluster.device` is `cpu`'))
    device: str = key("cpu", choices=('cpu', 'h100', 'h200', 'a100'), required=True)


@dataclass(kw_only=True)
class ParallelConfig(Section):
    tp: int = key(1, ge=1, doc='tensor parallel')
    pp: int = key(1, ge=1, doc='pipeline parallel (megatron: 1F1B schedule; must divide the layers; untied embeddings)')
    cp: int = key(1, ge=1, doc='context parallel (megatron: all-gather K/V attention; rows padded to 2 x cp)')
    ep: int = key(1, ge=1, doc='expert parallel')
    etp: int = key(1, ge=1, doc='expert tensor parallel')
    sp: bool = key(False, doc='sequence parallel; dp is derived by the plan')


DECAYS = ("constant", "linear", "cosine")  # `policy.optimizer.decay`: the shapes rl/lr_schedule.py computes


@dataclass(kw_only=True)
class OptimizerConfig(Section):
    """`policy.optimizer`: AdamW, and the lr schedule rl/lr_schedule.py computes from it.

    `lr` is the peak; `decay_steps` and `min_lr` are read by the linear and cosine decays only (a
    constant decay never leaves `lr`), so they are refused with it: megatron-core's recipes set
    them anyway, and there they do nothing."""

    lr: float = key(1.0e-4, gt=0)
    weight_decay: float = key(0.0, ge=0)
    betas: list[float] = key([0.9, 0.999], shown="two numbers in [0, 1)", json={
        'minItems': 2, 'maxItems': 2, 'items': {'type': 'number', 'minimum': 0, 'exclusiveMaximum': 1}})
    eps: float = key(1.0e-8, gt=0)
    grad_clip: float | None = key(None, gt=0, doc='max gradient norm; null: no clipping')
    warmup_steps: int = key(0, ge=0, doc=(
        'linear warm-up from `warmup_init_lr` to `lr` over this many steps: step 1 trains at '
        "`warmup_init_lr`, step `warmup_steps` + 1 at `lr` (megatron-core's scheduler and torch's"
        ' `LinearLR` as the reference steps them, after each optimizer step); 0: none'))
    warmup_init_lr: float = key(0.0, ge=0, doc='the lr the warm-up starts from')
    decay: str = key("constant", choices=DECAYS, doc=(
        'after the warm-up: hold `lr`, or fall to `min_lr` by step `decay_steps` and stay there'))
    decay_steps: int | None = key(None, ge=1, doc=(
        'the step a `linear` or `cosine` decay reaches `min_lr`, counted from the start of '
        'training (> `warmup_steps`); required by those two, refused with `constant` (which would'
        ' not read it)'))
    min_lr: float = key(0.0, ge=0, doc=(
        'where a `linear` or `cosine` decay ends; refused with `constant` unless 0 (which would '
        'not read it)'))

    def __post_init__(self) -> None:
        path = "policy.optimizer"  # [0, lr] before the keys' own bounds: it says more
        if not 0.0 <= self.warmup_init_lr <= self.lr:
            raise ValueError(f"{path}.warmup_init_lr: must be in [0, lr={self.lr}] (the warm-up rises "
                             f"to lr), got {self.warmup_init_lr}")
        if not 0.0 <= self.min_lr <= self.lr:
            raise ValueError(f"{path}.min_lr: must be in [0, lr={self.lr}] (the decay falls from lr), "
                             f"got {self.min_lr}")
        super().__post_init__()
        if self.decay == "constant" and (self.decay_steps is not None or self.min_lr != 0.0):
            unread = "decay_steps" if self.decay_steps is not None else "min_lr"
            raise ValueError(f"{path}.{unread}: a constant decay does not read it (only linear and cosine do); "
                             "remove it or set decay")
        if self.decay != "constant" and self.decay_steps is None:
            raise ValueError(f"{path}.decay_steps: decay {self.decay!r} needs it (the step it reaches min_lr at)")
        if self.decay != "constant" and self.decay_steps <= self.warmup_steps:
            raise ValueError(f"{path}.decay_steps: must be > warmup_steps={self.warmup_steps} (the decay "
                             f"starts where the warm-up ends), got {self.decay_steps}")


@dataclass(kw_only=True)
class SequencePackingConfig(Section):
    """The training and log-prob passes lay whole rows end to end in packed rows of
    `max_tokens_per_row` tokens instead of padding each row (rl/models/packing.py); both backends
    pack (megatron: rl/backends/megatron/packed.py, its limits in rl/backends/megatron/rules.py)."""

    enabled: bool = key(False, doc=(
        'the training and log-prob passes lay whole rows end to end in packed rows (first fit '
        'decreasing, a pure function of the row lengths) instead of padding each row, '
        '`policy.micro_batch_size` packed rows to a forward. Positions restart per sequence (a '
        "VLM's multimodal rotary positions too), full attention is block-diagonal, the "
        'gated-delta-net layers run each sequence on its own, and every log-prob returns to its '
        "row's place, so the loss and metrics equal the unpacked ones up to float rounding "
        '(torch: rl/models/packed_forward.py, tests/rl/test_sequence_packing.py; megatron: its '
        'THD layout, rl/backends/megatron/packed.py, tests/rl/test_megatron_packing.py, with tp, '
        "ep, pp and cp; under sequence parallelism a packed row's width is rounded up to a "
        'multiple of tp; with cp each sequence is split over the CP ranks, '
        "rl/backends/megatron/packed_context.py). Refused for a VLM on megatron, with megatron's "
        'cp > 1 and pp > 1 together, and for distillation'))
    max_tokens_per_row: int | None = key(None, ge=1, doc=(
        'tokens a packed row holds; null: as many as an unpacked row (prompt + '
        '`generation.max_new_tokens`), so a forward never holds more tokens than unpacked. A row '
        "longer than it is an error, never cut; the plan's activation estimate uses it in place "
        'of `policy.max_seq_len`. Read only with `enabled: true` (refused otherwise)'))


@dataclass(kw_only=True)
class PolicyConfig(Section):
    backend: str = key("torch", choices=tuple(backend_names()), doc='training backend (rl/backends/rules.py)')
    parallel: ParallelConfig = section(ParallelConfig)
    micro_batch_size: int = key(8, ge=1)
    logprob_batch_size: int | None = key(None, ge=1, doc=(
        "rows per forward of the log-prob passes (the old policy's and the reference's, every "
        'step); `null`: `policy.micro_batch_size`. No activations are kept there, so it can be '
        'larger (on one H200 the hybrid dense_1b log-prob pass made 106,187 tokens/s at 4 rows a '
        'forward and 224,645 at 16, 2026-12-01, docs/benchmarks.md). Log-probs equal those at '
        '`micro_batch_size` up to float rounding (tests/rl/test_logprob_batch_size.py)'))
    max_seq_len: int | None = key(None, ge=1, doc=(
        "longest prompt+response trained on; sizes the plan's activation estimate (null: "
        '`generation.max_new_tokens` + 256); read by the plan only, the engine does not cut '
        'sequences to it'))
    precision: str = key("fp32", choices=('fp32', 'bf16'))
    distributed_optimizer: bool = key(False)
    activation_checkpointing: bool = key(False, doc=(
        "keep only each transformer layer's input and recompute the layer in its backward: "
        "megatron's full recompute one layer at a time, or Hugging Face gradient checkpointing on"
        ' the torch backend; memory for about a third more compute (the plan counts it: '
        "harness/plan/memory.py). The reference's nightly Qwen3.5 recipes set it; so does our "
        'full-scale base, not its twins'))
    sequence_packing: SequencePackingConfig = section(SequencePackingConfig)
    compile: bool = key(False, doc=(
        'megatron backend on a GPU: each transformer layer and the token log-prob under '
        "`torch.compile` (a gated-delta-net layer around its recurrence, fla's kernels eager; a "
        'MoE layer around its router and dispatcher; with tp 1 the log-prob reads the bf16 logits'
        ' once, fused; rl/backends/megatron/compile.py). Refused on a CPU recipe and for the '
        'torch backend'))
    optimizer: OptimizerConfig = section(OptimizerConfig)
    env: dict[str, str] = key({}, json={'$ref': '#/$defs/env'}, doc=(
        'environment variables for the training workers only, over the top-level `env` (this one '
        'wins a clash); the same rules as `env`, see "Role env" below'))


@dataclass(kw_only=True)
class GenerationConfig(Section):
    backend: str = key("torch", choices=('torch', 'vllm'), doc=(
        "`torch`: the engine's own generator (rl/generation). `vllm` is refused on every machine "
        '(`harness validate`): this engine does not implement it, as vLLM cannot run on our GPU '
        "machines; the reference's recipes name it, so the schema knows the name"))
    tp: int = key(1, ge=1, doc='tensor parallel of each generation replica; the torch backend runs unsharded (1 only)')
    max_new_tokens: int = key(8, ge=1)
    ignore_eos: bool = key(False, doc=(
        'every completion runs to `max_new_tokens`: the end-of-sequence token no longer ends a '
        "row (it may be sampled and the row goes on), as vLLM's `ignore_eos`; for throughput runs"
        ' of a known shape (recipes/perf_grpo_dense_1b.yaml). Refused before launch for a task '
        'whose score reads where a completion ends: every task but `fixed_length` '
        '(rl/envs/registry.py `EOS_FREE_TASKS`)'))
    length_buckets: int = key(1, ge=1, doc=(
        "decode each call's rows in this many groups of similar prompt length: rows stably sorted"
        ' by prompt length, cut into runs of near-equal size, each decoded with its prompts cut '
        "to its own longest, rows put back in the caller's order (the `generation_row_order` "
        "invariant checks each row's seed and prompt; the harness requires it when this is > 1). "
        'Same tokens as one block (each row has its own generator); '
        '`rl/generation/length_buckets.py` gives the padding fractions measured on `word_math`. '
        '1: one block'))
    decode_slots: int = key(4, ge=1, doc=(
        "call shapes (rows bucket, prompt length, new tokens) a replica's static decoder "
        '(`decode: graphs` or `static`) keeps, each with its own cache and captured graph, least '
        "recently used dropped first: `harness plan` counts this many caches on the replica's GPU"
        " in both phases. Fewer: less memory, more captures when a run's shapes alternate "
        '(rollouts and validation, length buckets)'))
    replicas: int | None = key(None, ge=1, doc=(
        'data-parallel generation replicas (`GenerationWorker`s `generation-0` .. '
        "`generation-{N-1}`), each holding the whole policy in the generation dtype. A call's "
        'prompt groups (whole GRPO groups: the runs of equal prompts) are spread over them '
        'balanced by expected tokens (prompt lengths plus `max_new_tokens` per row, largest group'
        " first to the least loaded replica), decoded concurrently and put back in the caller's "
        "order (the `generation_row_order` invariant, one record a call, with each replica's rows"
        ' and expected tokens; the harness requires it when this is > 1); '
        "`performance/generation_replica_max_over_mean` is the busiest replica's decoded tokens "
        "over the mean's, each step. Same tokens whatever the count (each row keeps its seed). "
        "Colocated on GPUs, replica i shares policy rank i's GPU and is refit from rank i's "
        "buckets on the device; on the CPU every replica loads the policy's weights from the "
        'object store. `null`: **one per GPU when colocated on GPUs, else 1** (`rl/cluster/placement.py` '
        "`generation_replicas`). Refused before launch: more than the run's GPUs when colocated "
        'on GPUs, and more than 1 with `generation.colocated: false` (its refit channel is a '
        'group of two)'))
    temperature: float = key(1.0, gt=0, doc='> 0: GRPO samples')
    colocated: bool = key(True, doc=(
        "GPU runs: generation replica i shares policy rank i's training GPU (weights handed over "
        'on the device); `false` gives the generator a GPU of its own, and rank 0 broadcasts the '
        'weights to it over a process group of two (`rl/refit/channel.py`: NCCL; gloo on the CPU,'
        ' where `false` only picks that refit path)'))
    offload_training: bool = key(False, doc=(
        "while the generation replicas decode, every policy rank's training state (the policy's "
        'weights and grads, the optimizer state, the reference copy) waits in host memory, pinned'
        " on a GPU, and the rank's device memory is freed (`torch.cuda.empty_cache()`: the blocks"
        " training's activations left go too), so a colocated replica has the room training held;"
        ' it comes back bit for bit for the log-prob and training passes (rl/backends/offload.py:'
        " each storage's bytes travel, every tensor, view and optimizer entry stays the one it "
        "was; both training backends, megatron's contiguous param and grad buffers included). "
        "`timing/train/offload` and `timing/train/reload` are each step's seconds (0 without it),"
        ' `performance/offloaded_gib` the most one rank moved. The plan then counts no training '
        'term in the generation phase. Refused before launch with `generation.colocated: false` '
        '(the generator has a GPU of its own) and under `distill` (no generation)'))
    decode: str = key("auto", choices=('auto', 'graphs', 'static', 'eager'), doc=(
        "the torch backend's decoding loop: `graphs` keeps a static cache (attention K/V and "
        'gated-delta-net states at fixed addresses) and replays the decode step, draw included, '
        "from a CUDA graph per batch bucket (GPU; a vision model's prompt forward, images "
        "included, stays eager, and each row's response continues from its prompt's M-RoPE "
        "layout); `static` the same loop without the graph; `eager` the model's own growing "
        'cache. `auto` = `graphs` on a GPU (`static` for a model with fp32 experts, whose fp32 '
        'grouped-GEMM fallback a CUDA graph cannot capture), `eager` otherwise. `graphs` on a CPU'
        ' recipe, or for fp32 experts, is refused before launch'))
    env: dict[str, str] = key({}, json={'$ref': '#/$defs/env'}, doc=(
        'environment variables for the generation workers only, over the top-level `env` (this '
        'one wins a clash); the same rules as `env`, see "Role env" below'))


@dataclass(kw_only=True)
class WarmStartConfig(Section):
    """A short supervised run before the algorithm (rl/warm_start.py); steps 0 disables it.

    stop_at_loss: end early once the mean loss of the last LOSS_WINDOW steps is at or below it
    (`steps` stays the cap). A tiny model's loss sits on a plateau for a seed-dependent number of
    steps and then falls fast, so a fixed step count leaves one seed at chance and the next near
    perfect; stopping at a loss leaves every seed partly trained, with room for the algorithm."""

    steps: int = key(0, ge=0, doc='supervised warm-start steps before RL; 0: none')
    lr: float = key(3.0e-3, gt=0)
    batch_size: int = key(32, ge=1)
    stop_at_loss: float | None = key(None, gt=0, doc=(
        'end early once the mean loss of the last 20 steps is at or below it (`steps` stays the '
        'cap): a tiny model leaves its loss plateau after a seed-dependent number of steps, so a '
        'loss target leaves every seed partly trained where a step count leaves one at chance'))

    LOSS_WINDOW: typing.ClassVar[int] = 20


@dataclass(kw_only=True)
class AlgorithmConfig(Section):
    name: str = key("grpo", choices=('grpo', 'distill'), doc=(
        '`distill`: cross-tokenizer distillation from `teacher` (docs/distillation.md)'))
    seed: int = key(42, ge=0, le=4294967295, doc=(
        "the engine seeds generators with `seed * 1000003 + step`, which must fit torch's 64 bits"))
    num_steps: int = key(20, ge=1, le=1000000000, required=True, doc=(
        "at most 10**9, the most `harness check` reads from a run dir's recipe.yaml"))
    prompts_per_step: int = key(16, ge=1)
    generations_per_prompt: int = key(4, ge=1, doc='at least 2 for GRPO with `leave_one_out`; exactly 1 for `distill`')
    baseline: str = key("leave_one_out", choices=('leave_one_out', 'mean'))
    normalize_rewards: bool = key(True)
    dynamic_sampling: bool = key(False)
    overlong_filtering: bool = key(False)
    loss: LossConfig = section(LossConfig)
    distill: DistillConfig = section(DistillConfig, doc=(
        'cross-tokenizer distillation loss (algorithm.name: distill only)'))
    warm_start: WarmStartConfig = section(WarmStartConfig)


@dataclass(kw_only=True)
class TeacherConfig(Section):
    """The distillation teacher: a frozen model of any registered family with its own tokenizer.

    `warm_start` trains it on the task before the run (cached, as the policy's is), so a tiny
    teacher built from a config has something to teach.
    """

    family: str = key("llama", choices=('qwen3_5', 'qwen3_5_moe', 'llama'), required=True, doc=(
        "the teacher's architecture class"))
    path: str | None = key(None, json={'minLength': 1, 'format': 'printable'}, doc=(
        'its local Hugging Face checkpoint; null: build from `teacher.config`'))
    config: dict[str, Any] = key({}, doc=(
        "fields of the family's Hugging Face config; `vocab_size` may pad the LM head past the "
        'tokenizer'))
    tokenizer: str = key("arith", required=True, json={'minLength': 1, 'format': 'printable'}, doc=(
        'shipped tokenizer name or a path, as `model.tokenizer`'))
    warm_start: WarmStartConfig = section(WarmStartConfig, doc=(
        "the teacher's supervised warm start on the task, keys as `algorithm.warm_start`"))

    @property
    def modality(self) -> str:
        """A teacher is a text model; the model builders read `modality` off either section."""
        return "text"


@dataclass(kw_only=True)
class TaskConfig(Section):
    name: str = key("arith", required=True, json={'pattern': '^[a-z0-9_]+$'}, doc='a task registered in `rl/envs/`')
    params: dict[str, Any] = key({}, doc='task-specific (free map): `fixed_length` and `counting` below')


@dataclass(kw_only=True)
class DataSourceConfig(Section):
    """One split of a dataset (rl/prompt_data.py): a shipped name, a local file or a Hub id."""

    path: str = key(required=True, json={'minLength': 1, 'format': 'printable'}, doc='the dataset, as above')
    split: str | None = key(None, json={'minLength': 1}, doc=(
        "a shipped dataset's file or a Hub split (which may slice); null for a local file"))


@dataclass(kw_only=True)
class DataConfig(Section):
    """Prompts and answers from a dataset, for a dataset task (`task.name: math`)."""

    train: DataSourceConfig | None = key(None, doc=(
        '`path`: a shipped dataset (a name without `/`, `rl/assets/data/NAME/SPLIT.jsonl`), a '
        'local `.jsonl`/`.json`/`.parquet` file (no split), or an `org/name` Hugging Face dataset'
        ' (through the `datasets` package, extra `datasets`; a split may slice: `train_1M[:95%]`)'))
    validation: DataSourceConfig | None = key(None, doc='the same; read by the validation pass')
    prompt_key: str = key("problem", json={'minLength': 1}, doc='the columns; a row without them is refused at set-up')
    answer_key: str = key("answer", json={'minLength': 1}, doc='the columns; a row without them is refused at set-up')
    prompt_template: str = key("{prompt}", json={'pattern': '\\{prompt\\}'}, doc=(
        "the row's prompt is put in place of `{prompt}`"))
    chat_template: bool = key(False, doc=(
        "wrap the prompt as one user turn with the tokenizer's chat template (generation prompt "
        'added)'))
    shuffle: bool = key(True, doc=(
        'seeded by `algorithm.seed`, reshuffled every epoch; the position (the data cursor) is '
        'saved in every checkpoint, so `--resume` continues it'))
    val_every_steps: int = key(0, ge=0, doc=(
        'a validation pass every N steps and at the last: one greedy completion per problem, '
        "logged as `val/accuracy` (and `val/num_samples`) in that step's metrics; needs "
        '`data.validation`'))
    val_max_samples: int = key(0, ge=0, doc='the first N validation rows; 0: all')


@dataclass(kw_only=True)
class TQConfig(Section):
    num_storage_units: int = key(1, ge=1)


@dataclass(kw_only=True)
class DataPlaneConfig(Section):
    backend: str = key("legacy", choices=('legacy', 'tq'), doc='in-memory `BatchedDataDict`, or TransferQueue')
    tq: TQConfig = section(TQConfig)


@dataclass(kw_only=True)
class CheckpointConfig(Section):
    every_steps: int = key(0, ge=0, doc='0: only at the end')
    at_end: bool = key(True, doc=(
        'also save after the last step; `false` with `every_steps: 0` writes no checkpoint (a '
        "throughput run: a 1.2 B policy's optimizer state is 23 GB, two minutes to save)"))
    hf_format: bool = key(False, doc=(
        'also write `step_N/hf/`: the policy as a Hugging Face checkpoint (`save_pretrained`, '
        'safetensors) with the tokenizer and its chat template; `from_pretrained` loads it '
        'without the engine'))
    dir: str | None = key(None, doc=(
        'where checkpoints go; null: RUN_DIR/checkpoints. A shared path every node and a '
        'restarted job see (docs/scale-out.md), relative to the recipe file that set it; '
        '`--resume` reads it'))


@dataclass(kw_only=True)
class ChecksConfig(Section):
    """Read by the harness; the engine only carries it so a resolved recipe parses."""

    thresholds: str | None = key(None, json={'minLength': 1, 'format': 'printable'}, doc=(
        'thresholds file, relative to the recipe file that set it'))
    hardware: str | None = key(None, filled=False, json={'type': 'string', 'minLength': 1, 'format': 'printable'},
                               doc='which hardware class of the thresholds file applies; absent: `cluster.device`')
    invariants: bool = key(True, doc="judge the engine's `invariants.jsonl`")
    parity: dict[str, Any] | None = key(None, doc='run variants from one seed and compare them')


@dataclass(kw_only=True)
class LimitsConfig(Section):
    timeout_s: int = key(3600, ge=1, doc='wall-clock limit of the engine')
    gpu_hours: float = key(0.0, ge=0, doc='GPU-hour budget; the plan refuses a run whose estimate exceeds it')
    worker_timeout_s: float = key(600.0, gt=0, doc=(
        "the longest the engine waits for one call to its workers (a step's generation, "
        'log-probs, train); past it the run stops with exit 4 and the workers are killed'))


@dataclass(kw_only=True)
class ProfileConfig(Section):
    """What a run measures of itself beyond its metrics (rl/metrics/kernel_trace.py)."""

    kernel_steps: list[int] | None = key(None, shown="[first, last] or null", json={
        'minItems': 2, 'maxItems': 2, 'items': {'type': 'integer', 'minimum': 1}}, doc=(
        'trace the CUDA kernels of steps first to last on every GPU (torch.profiler) and write each '
        "traced step's `performance/gpu_busy_fraction`: the time a GPU ran any kernel, copy or memset "
        "over the step's wall time, the mean over GPUs (1 minus it: the host overhead), and "
        '`performance/gpu_busy_fraction/generation` and `/training` over those phases. A GPU run\'s '
        'key; a traced step pays the tracing (a few percent)'))


@dataclass(kw_only=True)
class RunConfig(Section):
    name: str = key(required=True, shown="`[a-z0-9_]+`, at most 100 characters",
                    json={'pattern': '^[a-z0-9_]+$', 'maxLength': 100}, doc=(
        'run name; run dirs are `runs/<name>-<time>/`'))
    description: str = key("", doc='one line on what the recipe is for')
    engine: Any = key("rl", doc='`rl`: our engine (`python -m rl.run`); or an external engine (the keys below)')
    model: ModelConfig = section(ModelConfig, required=True)
    teacher: TeacherConfig | None = key(None, filled=False, doc=(
        'null or absent: no teacher; the frozen teacher of algorithm.name: distill (another '
        'family and tokenizer welcome); only distillation reads it'))
    cluster: ClusterConfig = section(ClusterConfig, required=True)
    policy: PolicyConfig = section(PolicyConfig)
    generation: GenerationConfig = section(GenerationConfig)
    algorithm: AlgorithmConfig = section(AlgorithmConfig, required=True)
    task: TaskConfig = section(TaskConfig, required=True)
    data: DataConfig = section(DataConfig, doc=(
        'prompts and answers from a dataset, for a dataset task (task.name: math)'))
    data_plane: DataPlaneConfig = section(DataPlaneConfig)
    env: dict[str, str] = key({}, json={'$ref': '#/$defs/env'}, doc=(
        'environment variables for the engine process and every worker; values must be strings '
        '(quote numbers); secrets: see below'))
    env_unsafe_allow: list[str] = key([], shown="list of names", json={'uniqueItems': True, 'items': {
        'type': 'string', 'pattern': '^(RAY_[A-Za-z0-9_]*|RL_FAULTS|LD_[A-Za-z0-9_]*|PYTHON[A-Za-z0-9_]*)$'}}, doc=(
        'guarded env names (`RAY_*`, `RL_FAULTS`, `LD_*`, `PYTHON*`) that `env`, `policy.env` and'
        ' `generation.env` may set anyway; see "What the engine refuses"'))
    checkpoint: CheckpointConfig = section(CheckpointConfig)
    run_dir: str | None = key(None, json={'minLength': 1, 'format': 'printable'}, doc=(
        "the folder a run's dir is made in when `harness run` gets no `--out` "
        '(`<run_dir>/<name>-<time>-<id>`); null: `./runs`. A shared path on a cluster '
        '(docs/scale-out.md)'))
    checks: ChecksConfig = section(ChecksConfig)
    limits: LimitsConfig = section(LimitsConfig)
    profile: ProfileConfig = section(ProfileConfig)
    tiny: dict[str, Any] = key({}, filled=False, doc="the tiny twin's overrides, applied by `--scale tiny` (consumed)")
    h200x1: dict[str, Any] = key({}, filled=False, doc=(
        "the 1 x H200 twin's overrides, applied by `--scale h200x1` (consumed)"))
    h200x2: dict[str, Any] = key({}, filled=False, doc=(
        "the 2 x H200 twin's overrides, applied by `--scale h200x2` (consumed)"))

    @property
    def world_size(self) -> int:
        """Policy ranks: nodes x devices per node (CPU ranks when device is cpu)."""
        return self.cluster.nodes * self.cluster.devices_per_node

    @property
    def dp_size(self) -> int:
        p = self.policy.parallel
        return self.world_size // (p.tp * p.pp * p.cp)

    @property
    def batch_rows(self) -> int:
        return self.algorithm.prompts_per_step * self.algorithm.generations_per_prompt

    def worker_env(self, role: str) -> dict[str, str | None]:
        """What each recipe variable must read in a worker of `role` ("policy" or "generation"):
        the top-level `env` overlaid by the role's own (`policy.env`, `generation.env`; the role
        wins a clash), and None (unset) for one that only the other role's env sets. The driver
        gets the top-level `env` alone."""
        own = {**self.env, **getattr(self, role).env}
        others = {name for r in ROLES if r != role for name in getattr(self, r).env}
        return {**own, **dict.fromkeys(sorted(others - own.keys()))}

    def __post_init__(self) -> None:
        super().__post_init__()
        _validate(self)


ROLES = ("policy", "generation")  # the worker roles; each has its own `env` over the top-level one


def _lookup(cfg: RunConfig, dotted: str) -> Any:
    obj: Any = cfg
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _validate(cfg: RunConfig) -> None:
    if cfg.algorithm.name == "grpo" and cfg.algorithm.generations_per_prompt < 2:
        raise ValueError("algorithm.generations_per_prompt: GRPO needs >= 2 samples per prompt")
    _validate_algorithm_sections(cfg)
    p = cfg.policy.parallel
    model_parallel = p.tp * p.pp * p.cp
    if cfg.world_size % model_parallel:
        raise ValueError(f"policy.parallel: tp*pp*cp={model_parallel} does not divide the "
                         f"world size {cfg.world_size} (cluster.nodes * cluster.devices_per_node)")
    if cfg.batch_rows % cfg.dp_size:
        raise ValueError(f"algorithm.prompts_per_step: prompts_per_step*generations_per_prompt="
                         f"{cfg.batch_rows} must be divisible by the data-parallel size {cfg.dp_size}")
    _validate_packing(cfg.policy.sequence_packing)
    _validate_data(cfg)
    _validate_profile(cfg)
    for scope in secret_env.SCOPES:
        for name, value in _lookup(cfg, scope).items():
            if not isinstance(value, str):
                raise ValueError(f"{scope}.{name}: environment values must be strings, got {value!r}")
    _validate_unsafe_env(cfg)


def _validate_unsafe_env(cfg: RunConfig) -> None:
    """Guarded env names (rl/recipe/unsafe_env.py) only where env_unsafe_allow lists them; the list holds
    guarded names only (a permission, so a base recipe may grant one its derived runs use)."""
    for scope in secret_env.SCOPES:
        names = list(_lookup(cfg, scope))
        refused = unsafe_env.refusal(scope, names, cfg.env_unsafe_allow)
        if refused:
            raise ValueError(refused)
    for i, name in enumerate(cfg.env_unsafe_allow):
        if not unsafe_env.guarded(name):
            raise ValueError(f"env_unsafe_allow[{i}]: {name!r} is not a guarded name (RAY_*, RL_FAULTS, LD_*, "
                             "PYTHON*): an env mapping sets it without asking")


def _validate_packing(packing: SequencePackingConfig) -> None:
    budget = packing.max_tokens_per_row
    if budget is None:
        return
    if not packing.enabled:
        raise ValueError("policy.sequence_packing.max_tokens_per_row: read only with policy.sequence_packing."
                         "enabled: true; enable packing or drop the budget")


def _validate_profile(cfg: RunConfig) -> None:
    steps = cfg.profile.kernel_steps
    if steps is None:
        return
    if len(steps) != 2 or not 1 <= steps[0] <= steps[1] <= cfg.algorithm.num_steps:
        raise ValueError(f"profile.kernel_steps: {steps} is not [first, last] with 1 <= first <= last <= "
                         f"algorithm.num_steps={cfg.algorithm.num_steps}")
    if cfg.cluster.device == "cpu":
        raise ValueError("profile.kernel_steps: traces CUDA kernels; cluster.device is cpu")


DATASET_TASKS = ("math",)  # tasks whose problems come from `data:` rather than a generator


def _validate_data(cfg: RunConfig) -> None:
    if cfg.model.tokenizer is None and not cfg.model.path:
        raise ValueError("model.tokenizer: null takes the tokenizer of model.path, but model.path is null too")
    d = cfg.data
    if cfg.task.name in DATASET_TASKS and d.train is None:
        raise ValueError(f"data.train: task {cfg.task.name!r} reads its problems from a dataset; name one")
    if d.train is not None and cfg.task.name not in DATASET_TASKS:
        raise ValueError(f"data.train: task {cfg.task.name!r} generates its problems and would ignore the "
                         f"dataset; use a dataset task ({', '.join(DATASET_TASKS)}) or drop data.train")
    if d.train is None and d.validation is not None:
        raise ValueError("data.validation: a validation split without data.train")
    if "{prompt}" not in d.prompt_template:
        raise ValueError(f"data.prompt_template: must contain {{prompt}}, got {d.prompt_template!r}")
    if d.val_every_steps and d.validation is None:
        raise ValueError("data.val_every_steps: a validation pass needs data.validation")
    if d.validation is not None and not d.val_every_steps:
        raise ValueError("data.validation: set data.val_every_steps (> 0), or the split is never read")


# What distillation does not read: it must stay at its default, or the recipe is refused.
GRPO_ONLY = ("algorithm.baseline", "algorithm.normalize_rewards", "algorithm.dynamic_sampling",
             "algorithm.loss", "generation.backend", "generation.tp", "generation.colocated",
             "generation.temperature", "generation.decode", "generation.env", "generation.ignore_eos",
             "generation.length_buckets", "generation.decode_slots", "generation.replicas",
             "generation.offload_training",
             "data.val_every_steps")


def _validate_algorithm_sections(cfg: RunConfig) -> None:
    """`teacher` and `algorithm.distill` belong to distillation; GRPO's own keys to GRPO."""
    if cfg.algorithm.name == "grpo":
        if cfg.teacher is not None:
            raise ValueError("teacher: only algorithm.name: distill reads it; drop it or use distill")
        if cfg.algorithm.distill != DistillConfig():
            raise ValueError("algorithm.distill: only algorithm.name: distill reads it; drop it or use distill")
        return
    if cfg.teacher is None:
        raise ValueError("teacher: algorithm.name: distill needs a teacher (family, tokenizer, path or config)")
    if cfg.algorithm.generations_per_prompt != 1:
        raise ValueError("algorithm.generations_per_prompt: distillation reads each datum once; set it to 1")
    defaults = RunConfig(name="defaults")
    for dotted in GRPO_ONLY:
        if _lookup(cfg, dotted) != _lookup(defaults, dotted):
            raise ValueError(f"{dotted}: algorithm.name: distill does not read it (off-policy, from the "
                             "task's answers); leave it at its default")


def parse_config(data: dict[str, Any]) -> RunConfig:
    """Build and validate a `RunConfig` from a resolved recipe mapping."""
    if isinstance(data, dict) and "defaults" in data:
        raise ValueError("recipe key 'defaults': resolve the recipe with the harness first "
                         "(`harness show`), the engine reads resolved recipes only")
    return build(RunConfig, data, "")


def read_recipe(path: str | Path) -> Any:
    """A resolved recipe YAML file as read, its pass-through env entries not yet resolved."""
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def resolved_config(data: Any) -> RunConfig:
    """`parse_config` of a recipe as read, its pass-through env entries taken from this process's
    environment (rl/recipe/secret_env.py)."""
    if isinstance(data, dict):
        data = secret_env.resolve_recipe(data, os.environ)
    return parse_config(data)


def load_config(path: str | Path) -> RunConfig:
    """Read a resolved recipe YAML file."""
    return resolved_config(read_recipe(path))
