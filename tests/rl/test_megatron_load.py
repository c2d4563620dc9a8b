"""Per-rank loading of megatron weights from a safetensors checkpoint (rl/backends/megatron/load.py).

Tiny twins (Qwen3.5's hybrid layout: 3 gated-delta-net layers, then an attention layer) are
saved with `save_pretrained` into several safetensors files (a small max_shard_size), then:
* for every rank of TP=2, EP=2 (with TP=2 x EP=2 for the MoE twins) and PP=2, `load_rank`
  must give exactly (keys, shapes, bits) what the full-load path gives: `from_pretrained`, the
  whole HF state dict, `hf_to_mcore`, `to_stage`, `shard` (the backend's `_shard`);
* a rank reads exactly the bytes it keeps (every slice is recorded), never another EP rank's
  experts nor another stage's layers;
* in a gloo world of 2 (spawned processes, no Ray), `MegatronBackend(weights=None)` reading
  `model.path` holds the same parameters, bit for bit, as one given the whole state dict.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest
import torch
from rank_processes import spawn_on_free_port

from rl.config import ModelConfig, OptimizerConfig, ParallelConfig, PolicyConfig

if importlib.util.find_spec("megatron") is None:
    pytest.skip("megatron-core is not installed", allow_module_level=True)

LAYER_TYPES = ["linear_attention"] * 3 + ["full_attention"]
VOCAB, VL_VOCAB = 32, 56
# name -> (family, modality, config overrides, dtype on disk)
TWINS = {
    "moe": ("qwen3_5_moe", "text", {}, torch.float32),
    "dense": ("qwen3_5", "text", {}, torch.float32),
    "dense_tied_bf16": ("qwen3_5", "text", {"tie_word_embeddings": True}, torch.bfloat16),
    "moe_vl": ("qwen3_5_moe", "vision", {}, torch.float32),
}
LAYOUTS = {  # name -> (tp, ep, pp)
    "tp2": (2, 1, 1), "ep2": (1, 2, 1), "tp2_ep2": (2, 2, 1), "pp2": (1, 1, 2),
}


def _model_cfg(twin: str, path: str | None = None) -> ModelConfig:
    family, modality, fields, _ = TWINS[twin]
    if modality == "vision":  # the VL twin's own config (hybrid already)
        return ModelConfig(family=family, modality=modality, tokenizer="arith_vl", path=path)
    return ModelConfig(family=family, modality=modality, config={"layer_types": LAYER_TYPES, **fields}, path=path)


def _save(twin: str, out: Path) -> Path:
    from rl.models import build_model

    dtype = TWINS[twin][3]
    vocab = VL_VOCAB if TWINS[twin][1] == "vision" else VOCAB
    model = build_model(_model_cfg(twin), vocab_size=vocab, seed=3).to(dtype)
    model.save_pretrained(str(out), max_shard_size="60KB")
    assert (out / "model.safetensors.index.json").is_file() and len(list(out.glob("*.safetensors"))) >= 2
    return out


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("megatron_load")
    return {twin: _save(twin, root / twin) for twin in TWINS}


def _coordinates(tp: int, ep: int, pp: int, num_layers: int):
    """(ShardRank, offset, count, first, last) of every rank of the layout (tp x pp grid, ep over it)."""
    from rl.backends.megatron.convert import ShardRank

    for stage in range(pp):
        for t in range(tp):
            for e in range(ep):
                count = num_layers // pp
                yield (ShardRank(tp_rank=t, tp_size=tp, ep_rank=e, ep_size=ep),
                       stage * count, count, stage == 0, stage == pp - 1)


def _full_path(twin: str, directory: Path):
    """What the driver path gives: the whole model via from_pretrained, its HF text dict, the tower."""
    from rl.backends.megatron import vision as mvis
    from rl.models import build_model

    vocab = VL_VOCAB if TWINS[twin][1] == "vision" else VOCAB
    model = build_model(_model_cfg(twin, str(directory)), vocab_size=vocab, seed=0)
    weights = model.state_dict()
    config = model.config.text_config if TWINS[twin][1] == "vision" else model.config
    text, visual = mvis.split_hf(weights) if TWINS[twin][1] == "vision" else (weights, {})
    return config, text, visual


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_rank_reads_equal_full_load_then_shard(checkpoints: dict[str, Path], twin: str) -> None:
    from rl.backends.megatron import convert as conv
    from rl.backends.megatron.load import SafetensorsCheckpoint, load_rank
    from rl.backends.megatron.pipeline import to_stage

    config, text, visual = _full_path(twin, checkpoints[twin])
    full = conv.hf_to_mcore(text, config)
    experts = int(getattr(config, "num_experts", 0) or 0)
    sections = conv.gdn_sections(config)
    on_disk = sum(t.numel() * TWINS[twin][3].itemsize for t in text.values()) + \
        sum(t.numel() * 4 for t in visual.values())
    checked = 0
    for layout, (tp, ep, pp) in LAYOUTS.items():
        if ep > 1 and not experts or (pp > 1 and config.tie_word_embeddings):
            continue
        for rank, offset, count, first, last in _coordinates(tp, ep, pp, config.num_hidden_layers):
            want = conv.shard(to_stage(full, offset=offset, count=count, first=first, last=last),
                              rank=rank, num_experts=experts, sections=sections)
            ckpt = SafetensorsCheckpoint(checkpoints[twin])
            got, got_visual = load_rank(ckpt, config, rank=rank, num_experts=experts, sections=sections,
                                        offset=offset, count=count, first=first, last=last,
                                        vision=bool(visual))
            where = f"{twin} {layout} {rank} stage@{offset}"
            assert sorted(got) == sorted(want), where
            for k in want:
                assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (where, k)
                assert torch.equal(got[k], want[k]), (where, k)
            assert sorted(got_visual) == (sorted(visual) if first else []), where
            assert all(torch.equal(got_visual[k], visual[k]) for k in got_visual), where
            # the rank read exactly the bytes it keeps (on disk: the checkpoint's dtype)
            kept = sum(t.numel() for t in got.values()) * TWINS[twin][3].itemsize + \
                sum(t.numel() * 4 for t in got_visual.values())
            assert ckpt.bytes_read == kept, where
            assert ckpt.bytes_read < on_disk, where
            keys = [key for key, _, _ in ckpt.reads]
            if ep > 1:  # another EP rank's experts are never opened
                mine = range(rank.ep_rank * experts // ep, (rank.ep_rank + 1) * experts // ep)
                theirs = [f"experts.{e}." for e in range(experts) if e not in mine]
                assert not [k for k in keys if any(t in k for t in theirs)], where
            if pp > 1:  # another stage's layers, and the other end's embedding or head, are never opened
                others = [f"layers.{i}." for i in range(config.num_hidden_layers) if not offset <= i < offset + count]
                assert not [k for k in keys if any(o in k for o in others)], where
                assert ("model.embed_tokens.weight" in " ".join(keys)) == first, where
                assert ("lm_head.weight" in keys) == last, where
            if tp > 1:  # a TP-split tensor is read in part: no whole read of the row-split embedding
                assert all(rows != (0, VL_VOCAB if visual else VOCAB) for key, rows, _ in ckpt.reads
                           if key.endswith("embed_tokens.weight")), where
            checked += 1
    # ranks compared: MoE tp2 + ep2 + tp2 x ep2 + pp2; dense tp2 + pp2; tied: no pp
    assert checked == {"moe": 10, "moe_vl": 10, "dense": 4, "dense_tied_bf16": 2}[twin]


def test_read_counts_are_recorded(checkpoints: dict[str, Path]) -> None:
    """The record the tests above rely on: a whole load reads every byte of the checkpoint once."""
    from rl.backends.megatron import convert as conv
    from rl.backends.megatron.load import SafetensorsCheckpoint, load_rank

    config, text, _ = _full_path("moe", checkpoints["moe"])
    ckpt = SafetensorsCheckpoint(checkpoints["moe"])
    load_rank(ckpt, config, rank=conv.ShardRank(), num_experts=config.num_experts,
              sections=conv.gdn_sections(config), offset=0, count=config.num_hidden_layers, first=True, last=True)
    assert ckpt.bytes_read == sum(t.numel() * 4 for t in text.values())
    assert len({key for key, _, _ in ckpt.reads}) == len(ckpt.weight_map)


def test_missing_tensor_is_an_error(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    import json
    import shutil

    from rl.backends.megatron import convert as conv
    from rl.backends.megatron.load import SafetensorsCheckpoint, load_rank

    directory = tmp_path / "broken"
    shutil.copytree(checkpoints["dense"], directory)
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    del index["weight_map"]["model.layers.3.self_attn.k_proj.weight"]
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    config, _, _ = _full_path("dense", checkpoints["dense"])
    with pytest.raises(KeyError, match="k_proj"):
        load_rank(SafetensorsCheckpoint(directory), config, rank=conv.ShardRank(), num_experts=0,
                  sections=conv.gdn_sections(config), offset=0, count=4, first=True, last=True)


# --- the backend in a gloo world of 2 --------------------------------------------------------

BACKEND_CASES = [("dense", {"tp": 2}), ("moe", {"ep": 2}), ("moe_vl", {"pp": 2})]
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)


def _worker(rank: int, world: int, port: int, out_dir: str, cases: list) -> None:
    import torch.distributed as dist

    from rl.backends.megatron import shims as megatron_shims

    megatron_shims.apply()
    from megatron.core import parallel_state

    from rl.backends import get_backend
    from rl.models import build_model

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    for i, (twin, path, parallel) in enumerate(cases):
        cfg = _model_cfg(twin, path)
        vocab = VL_VOCAB if TWINS[twin][1] == "vision" else VOCAB
        kwargs = dict(model=cfg, vocab_size=vocab, seed=0,
                      policy=PolicyConfig(optimizer=OPT, micro_batch_size=2, parallel=ParallelConfig(**parallel)))
        params = {}
        for mode in ("whole", "path"):
            weights = build_model(cfg, vocab_size=vocab, seed=0).state_dict() if mode == "whole" else None
            backend = get_backend("megatron")(weights=weights, **kwargs)
            params[mode] = {n: p.detach().clone() for n, p in backend.gpt.named_parameters()}
            params[mode + "_ref"] = {n: p.detach().clone() for n, p in backend.reference_gpt.named_parameters()}
            del backend
            parallel_state.destroy_model_parallel()
        torch.save(params, os.path.join(out_dir, f"case{i}-rank{rank}.pt"))
    dist.destroy_process_group()


def test_backend_reading_model_path_equals_whole_weights(checkpoints: dict[str, Path]) -> None:
    cases = [(twin, str(checkpoints[twin]), parallel) for twin, parallel in BACKEND_CASES]
    with tempfile.TemporaryDirectory() as out_dir:
        spawn_on_free_port(_worker, lambda port: (2, port, out_dir, cases), 2)
        results = [[torch.load(os.path.join(out_dir, f"case{i}-rank{r}.pt")) for r in range(2)]
                   for i in range(len(cases))]
    for (twin, _, parallel), ranks in zip(cases, results):
        for r, params in enumerate(ranks):
            for mode in ("", "_ref"):
                whole, path = params["whole" + mode], params["path" + mode]
                assert sorted(whole) == sorted(path) and whole, (twin, parallel, r)
                for name in whole:
                    assert torch.equal(whole[name], path[name]), (twin, parallel, r, mode, name)


def test_engine_reads_shards_only_where_the_checkpoint_is_the_start() -> None:
    """rl/run.py: workers read model.path themselves for megatron + model.path, not after a warm
    start (the driver trained the weights), not on resume, not for the torch backend or a twin."""
    from rl.config import parse_config
    from rl.run import Engine

    def recipe(**over) -> dict:
        base = {"name": "x", "model": {"family": "qwen3_5_moe", "path": "tiny_qwen3_5_moe", "tokenizer": None},
                "policy": {"backend": "megatron"}}
        for key, value in over.items():
            section, field = key.split("__")
            base.setdefault(section, {})[field] = value
        return base

    assert Engine.shard_reads(parse_config(recipe()), resume=False)
    assert not Engine.shard_reads(parse_config(recipe()), resume=True)
    assert not Engine.shard_reads(parse_config(recipe(policy__backend="torch")), resume=False)
    assert not Engine.shard_reads(parse_config(recipe(algorithm__warm_start={"steps": 5})), resume=False)
    twin = recipe()
    twin["model"] = {"family": "qwen3_5_moe", "path": None}
    assert not Engine.shard_reads(parse_config(twin), resume=False)
