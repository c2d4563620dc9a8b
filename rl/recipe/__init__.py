"""The recipe described once: each config field carries its doc, choices and bounds (key.py), the
engine reads a mapping into the dataclasses (read.py), and `python -m rl.recipe` writes the JSON
Schema the harness reads and the key tables of docs/recipes.md from them (schema.py, docs.py)."""
