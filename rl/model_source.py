"""Where `model.path` points: a shipped tiny checkpoint, a local directory, or a Hugging Face id.

    resolve_model_dir("tiny_qwen3_5_moe")            # rl/assets/checkpoints/tiny_qwen3_5_moe
    resolve_model_dir("/data/ckpt/step_100/hf")       # a local directory
    resolve_model_dir("Qwen/Qwen3.5-35B-A3B-Base")    # the local Hugging Face cache

A name without '/' is shipped with the engine (as for `model.tokenizer`); a path (leading '/',
'.', '~', or an existing directory) is local; anything else of the form `org/name` is a Hub id,
read from the local Hugging Face cache (HF_HOME / HF_HUB_CACHE) and never downloaded: engine
machines have no network, so the engine behaves as under HF_HUB_OFFLINE everywhere. A checkpoint
that is not on disk is one line naming the files it needs (`hf download ORG/NAME` fetches them
on a machine with network), from `harness plan` and the preflight as from the engine.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["CHECKPOINTS_DIR", "NEEDED", "ModelSourceError", "is_hub_id", "missing_files",
           "resolve_model_dir", "shipped_checkpoints"]

CHECKPOINTS_DIR = Path(__file__).resolve().parent / "assets" / "checkpoints"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
# What a text checkpoint directory needs: the config, a tokenizer, and the weights (one file or
# an index naming the shards).
NEEDED = ("config.json", "tokenizer.json", "tokenizer_config.json",
          "model.safetensors or model.safetensors.index.json and its shards")


class ModelSourceError(ValueError):
    """model.path names nothing usable here; the message is one line led by the key."""


def shipped_checkpoints() -> list[str]:
    return sorted(p.name for p in CHECKPOINTS_DIR.iterdir() if (p / "config.json").is_file()) \
        if CHECKPOINTS_DIR.is_dir() else []


def _is_local(path: str) -> bool:
    return path.startswith(("/", ".", "~")) or Path(path).expanduser().is_dir()


def is_hub_id(path: str) -> bool:
    """`org/name` that is not a local path."""
    return not _is_local(path) and bool(_HUB_ID.match(path))


def _cached_snapshot(repo_id: str) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except LocalEntryNotFoundError:
        return None


def _weights_present(directory: Path) -> bool:
    if (directory / "model.safetensors").is_file():
        return True
    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        return False
    import json

    shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
    return bool(shards) and all((directory / s).is_file() for s in shards)


def missing_files(directory: Path) -> list[str]:
    """What `NEEDED` lacks in `directory` (empty when the checkpoint is whole)."""
    out = [name for name in NEEDED[:3] if not (directory / name).is_file()]
    if not _weights_present(directory):
        out.append(NEEDED[3])
    return out


def resolve_model_dir(path: str, *, key: str = "model.path") -> Path:
    """The local directory holding the checkpoint `path` names.

    Raises:
        ModelSourceError: nothing at `path`, a Hub id whose files are not in the local cache, or
            a directory without config.json.
    """
    if "/" not in path and not path.startswith(("~", ".")):
        directory = CHECKPOINTS_DIR / path
        if not (directory / "config.json").is_file():
            raise ModelSourceError(f"{key}: unknown shipped checkpoint {path!r}; shipped ones are "
                                   f"{shipped_checkpoints()} (or give a local path or an org/name Hub id)")
        return directory
    if is_hub_id(path):
        directory = _cached_snapshot(path)
        if directory is None or missing_files(directory):
            need = missing_files(directory) if directory is not None else list(NEEDED)
            raise ModelSourceError(f"{key}: {path} is not in this machine's Hugging Face cache; it needs "
                                   f"{', '.join(need)} (`hf download {path}` where there is network, "
                                   f"or point {key} at a local directory)")
        return directory
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise ModelSourceError(f"{key}: no such directory {path!r}")
    if not (directory / "config.json").is_file():
        raise ModelSourceError(f"{key}: {path!r} has no config.json (not a Hugging Face checkpoint directory)")
    return directory
