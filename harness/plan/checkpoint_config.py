"""The config.json of the checkpoint `model.path` names, when this machine has it, for the plan.

`harness plan` sizes memory and checks head divisibility from the model's shape. With a
`model.path`, that shape is the checkpoint's: its config.json (the text part of a
vision-language one), with the recipe's `model.config` fields on top (the engine passes them to
`from_pretrained` as overrides). The file is looked up without network and without the engine:
a local directory, or a Hub id's snapshot in the local Hugging Face cache (HF_HUB_CACHE, else
HF_HOME/hub, else ~/.cache/huggingface/hub; the `main` ref's snapshot). A name without '/' is a
checkpoint shipped with the engine, which the engine's preflight reads; the plan then uses
`model.config`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["checkpoint_config_file", "hub_cache", "missing_config_hint", "planned_model_config"]


def hub_cache() -> Path:
    """The local Hugging Face Hub cache this process reads (never writes)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"


def _hub_repo(path: str) -> Path:
    """The cache folder of Hub id `path` (org/name), whether or not it is there."""
    org, _, name = path.partition("/")
    return hub_cache() / f"models--{org}--{name}"


def checkpoint_config_file(path: str | None) -> Path | None:
    """config.json of a local checkpoint directory or a cached Hub snapshot; None when absent."""
    if not path or "/" not in path:
        return None
    local = Path(path).expanduser()
    if local.is_dir():
        return local / "config.json" if (local / "config.json").is_file() else None
    repo = _hub_repo(path)
    ref = repo / "refs" / "main"
    if not ref.is_file():
        return None
    config = repo / "snapshots" / ref.read_text(encoding="utf-8").strip() / "config.json"
    return config if config.is_file() else None


def missing_config_hint(path: str | None) -> str:
    """Where the model's shape can come from when the plan found no config.json for `path`."""
    if not path or "/" not in path:
        return "add it to the recipe"
    if Path(path).expanduser().is_dir() or path.startswith(("/", ".", "~")):
        return f"add it to the recipe, or a config.json to {path}"
    return (f"add it to the recipe, or put {path}'s config.json in the Hugging Face cache, under "
            f"{_hub_repo(path)} (refs/main and the snapshot it names)")


def planned_model_config(model: Mapping) -> tuple[dict[str, Any], Path | None]:
    """(the fields to plan with, the config.json they came from or None)."""
    overrides = dict(model.get("config") or {})
    file = checkpoint_config_file(model.get("path"))
    if file is None:
        return overrides, None
    fields = json.loads(file.read_text(encoding="utf-8"))
    fields = dict(fields.get("text_config") or fields)  # a VL checkpoint: its language model's shape
    return {**fields, **overrides}, file
