"""model.path and model.tokenizer: null: the shipped tiny checkpoint, local directories, Hub ids
read from the local cache only (one line naming the files a machine needs), and the script that
writes the shipped checkpoint reproducing it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rl.model_source import CHECKPOINTS_DIR, ModelSourceError, missing_files, resolve_model_dir
from rl.tokenizer import load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
TINY = "tiny_qwen3_5_moe"


def test_shipped_checkpoint_is_what_the_script_writes(tmp_path: Path) -> None:
    """Config and tokenizer are reproduced exactly; the weights are the seeded initialisation
    warm-started as SOURCE records (the warm start itself is the engine's, tested elsewhere)."""
    subprocess.run([sys.executable, str(CHECKPOINTS_DIR / "make_tiny.py"), "--out", str(tmp_path), "--no-warm-start"],
                   cwd=ROOT, check=True, capture_output=True)
    shipped, fresh = CHECKPOINTS_DIR / TINY, tmp_path / TINY
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (shipped / name).read_text() == (fresh / name).read_text(), name
    a, b = load_file(shipped / "model.safetensors"), load_file(fresh / "model.safetensors")
    assert sorted(a) == sorted(b) and all(a[k].shape == b[k].shape for k in a)
    assert any(not torch.equal(a[k], b[k]) for k in a)  # trained, not the bare initialisation
    source = json.loads((shipped / "SOURCE").read_text())
    assert source["seed"] == 42 and source["warm_start"]["steps"] == 120
    assert source["warm_start"]["data"] == {"path": "word_math", "split": "train"}


def test_tokenizer_null_takes_the_checkpoints_chat_template() -> None:
    tok = load_tokenizer(None, model_path=TINY)
    text = tok.apply_chat_template([{"role": "user", "content": "3+4"}], add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\n3+4<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text  # one token per character
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id == 0
    with pytest.raises(ValueError, match="model.tokenizer: null .* model.path is null"):
        load_tokenizer(None)


def test_local_directory_and_its_errors(tmp_path: Path) -> None:
    local = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINTS_DIR / TINY, local)
    assert resolve_model_dir(str(local)) == local and missing_files(local) == []
    (local / "model.safetensors").unlink()
    assert missing_files(local) == ["model.safetensors or model.safetensors.index.json and its shards"]
    with pytest.raises(ModelSourceError, match=r"^model.path: no such directory"):
        resolve_model_dir(str(tmp_path / "absent"))
    with pytest.raises(ModelSourceError, match=r"^model.path: unknown shipped checkpoint 'tiny_nope'"):
        resolve_model_dir("tiny_nope")


def test_sharded_checkpoint_needs_every_shard(tmp_path: Path) -> None:
    local = tmp_path / "sharded"
    shutil.copytree(CHECKPOINTS_DIR / TINY, local)
    (local / "model.safetensors").rename(local / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (local / "model.safetensors.index.json").write_text(json.dumps(index))
    assert missing_files(local) == ["model.safetensors or model.safetensors.index.json and its shards"]


def test_hub_id_not_in_cache_is_one_line_naming_the_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelSourceError) as info:
        resolve_model_dir("Qwen/Qwen3.5-35B-A3B-Base")
    message = str(info.value)
    assert "\n" not in message and message.startswith("model.path: Qwen/Qwen3.5-35B-A3B-Base is not in")
    assert "config.json" in message and "hf download Qwen/Qwen3.5-35B-A3B-Base" in message
