"""What `python -m rl.recipe` writes: the schema file and docs/recipes.md, as text."""

from __future__ import annotations

import json
from pathlib import Path

from rl.config import RunConfig
from rl.recipe.docs import fill_tables, shown_types
from rl.recipe.schema import recipe_schema

__all__ = ["DOCS", "SCHEMA", "generated"]

SCHEMA = "harness/schema/recipe.schema.json"
DOCS = "docs/recipes.md"


def generated(root: Path, run_config: type | None = None) -> dict[str, str]:
    """Repository-relative path -> the text it must hold, for `run_config` (default: rl.config's)."""
    run_config = run_config or RunConfig  # a test passes one with a throwaway key
    schema = recipe_schema(run_config)
    docs = fill_tables((root / DOCS).read_text(encoding="utf-8"), schema, shown_types(run_config))
    return {SCHEMA: json.dumps(schema, indent=2, ensure_ascii=False) + "\n", DOCS: docs}
