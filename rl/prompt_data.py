"""Prompt/answer rows of a recipe's `data:` section, from wherever they live.

A source is `{path, split}`:

* a name without '/' (e.g. `tiny_math`): a dataset shipped in `rl/assets/data/NAME/`, one
  JSONL file per split (`train.jsonl`, `validation.jsonl`);
* a local file (a path with '/', ending `.jsonl`, `.json` or `.parquet`): its rows, no split;
* an `org/name` Hugging Face dataset id: `datasets.load_dataset(path, split=split)` (a split may
  slice, e.g. `train[:95%]`), read from the local cache when `HF_HUB_OFFLINE` is set.

Rows are plain dicts; `load_rows` keeps only the prompt and answer columns the recipe names and
refuses a source that lacks them, so a wrong key fails at set-up with one line, not as zero reward.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["DATA_DIR", "SourceKind", "load_rows", "shipped_datasets", "source_kind"]

DATA_DIR = Path(__file__).resolve().parent / "assets" / "data"
LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")


class SourceKind:
    SHIPPED, LOCAL, HUB = "shipped", "local", "hub"


def shipped_datasets() -> list[str]:
    return sorted(p.name for p in DATA_DIR.iterdir() if any(p.glob("*.jsonl"))) if DATA_DIR.is_dir() else []


def source_kind(path: str) -> str:
    if "/" not in path and not path.startswith(("~", ".")):
        return SourceKind.SHIPPED
    if path.startswith(("/", ".", "~")) or path.endswith(LOCAL_SUFFIXES) or Path(path).expanduser().exists():
        return SourceKind.LOCAL
    return SourceKind.HUB


def source_file(path: str, split: str | None, *, key: str) -> Path:
    """The file a shipped or local source reads (ValueError when there is none)."""
    kind = source_kind(path)
    if kind == SourceKind.SHIPPED:
        if not split:
            raise ValueError(f"{key}.split: a shipped dataset needs a split (a file of rl/assets/data/{path}/)")
        file = DATA_DIR / path / f"{split}.jsonl"
        if not file.is_file():
            raise ValueError(f"{key}: no shipped dataset {path!r} with split {split!r}; shipped: {shipped_datasets()}")
        return file
    if split:
        raise ValueError(f"{key}.split: {split!r}, but a local file has no splits (give one file per split)")
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"{key}.path: no such file {path!r}")
    if not file.name.endswith(LOCAL_SUFFIXES):
        raise ValueError(f"{key}.path: {path!r} is not one of {', '.join(LOCAL_SUFFIXES)}")
    return file


def _read_file(file: Path) -> list[dict]:
    if file.name.endswith(".parquet"):
        import pyarrow.parquet as pq  # comes with the `datasets` extra

        return pq.read_table(file).to_pylist()
    text = file.read_text(encoding="utf-8")
    if file.name.endswith(".json"):
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _read_hub(path: str, split: str | None) -> list[dict]:
    try:
        import datasets
    except ImportError:
        raise ValueError(f"data: {path} is a Hugging Face dataset, and the `datasets` package is not "
                         "installed here (pip install 'recipe-harness[datasets]')") from None
    try:
        return list(datasets.load_dataset(path, split=split or "train"))
    except (FileNotFoundError, ConnectionError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"data: cannot load {path} split {split or 'train'} ({first})") from None


def load_rows(path: str, split: str | None, *, prompt_key: str, answer_key: str,
              key: str = "data.train") -> list[tuple[str, str]]:
    """(prompt, answer) of every row, in file order."""
    if source_kind(path) == SourceKind.HUB:
        rows = _read_hub(path, split)
    else:
        rows = _read_file(source_file(path, split, key=key))
    if not rows:
        raise ValueError(f"{key}: {path} split {split} has no rows")
    for i, row in enumerate(rows):
        for column, name in ((prompt_key, "data.prompt_key"), (answer_key, "data.answer_key")):
            if column not in row:
                raise ValueError(f"{name}: row {i} of {path} has no column {column!r}; it has {sorted(row)}")
    return [(str(row[prompt_key]), str(row[answer_key])) for row in rows]
