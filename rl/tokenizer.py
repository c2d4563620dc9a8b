"""Load the tokenizer a recipe names: a folder shipped in `rl/assets/tokenizers/`, a local path,
or (`model.tokenizer: null`) the checkpoint's own at `model.path`, chat template included.

Tokenizers load offline only (engine machines cannot download); the checkpoint's is found as
`model.path` is (rl/model_source.py).
"""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedTokenizerFast

ASSETS_DIR = Path(__file__).resolve().parent / "assets" / "tokenizers"


def shipped_tokenizers() -> list[str]:
    """Names usable as `model.tokenizer` without a path."""
    return sorted(p.name for p in ASSETS_DIR.iterdir() if (p / "tokenizer.json").is_file())


def resolve_tokenizer_dir(name_or_path: str) -> Path:
    """A name without '/' is a shipped tokenizer; anything with a '/' is a local directory."""
    if "/" in name_or_path:
        path = Path(name_or_path).expanduser()
        if not path.is_dir():
            raise ValueError(f"model.tokenizer: no such directory {name_or_path!r}")
        return path
    path = ASSETS_DIR / name_or_path
    if not (path / "tokenizer.json").is_file():
        raise ValueError(
            f"model.tokenizer: unknown tokenizer {name_or_path!r}; shipped ones are "
            f"{shipped_tokenizers()} (or give a local path containing a '/')"
        )
    return path


def recipe_tokenizer_dir(tokenizer: str | None, model_path: str | None) -> Path:
    """The directory of the recipe's tokenizer: `model.tokenizer`, or the checkpoint's when null."""
    if tokenizer is not None:
        return resolve_tokenizer_dir(tokenizer)
    if not model_path:
        raise ValueError("model.tokenizer: null takes the tokenizer of model.path, but model.path is null too")
    from rl.model_source import resolve_model_dir

    return resolve_model_dir(model_path)


def load_tokenizer(name_or_path: str | None, *, model_path: str | None = None) -> PreTrainedTokenizerFast:
    """Load a Hugging Face fast tokenizer that has pad and eos tokens (see `recipe_tokenizer_dir`)."""
    path = recipe_tokenizer_dir(name_or_path, model_path)
    tok = PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)
    if tok.pad_token_id is None or tok.eos_token_id is None:
        raise ValueError(f"model.tokenizer: {name_or_path or model_path!r} must define both a pad and an eos token")
    return tok
