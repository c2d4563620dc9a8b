"""The named twins a recipe may carry, each a top-level block of dotted overrides applied by
`--scale NAME`: `tiny` runs on a laptop CPU, `h200x1` on one H200 (the GPU smoke suite's scale),
`h200x2` on two H200s. Kept apart so the CLI can list them without importing the recipe loader."""

SCALES = ("tiny", "h200x1", "h200x2")
