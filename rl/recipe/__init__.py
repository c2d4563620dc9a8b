"""The recipe described once: each config field carries its doc, choices and bounds (key.py), the
engine reads a mapping into the dataclasses (read.py), and `python -m rl.recipe` writes the JSON
Schema the harness reads and the key tables of docs/recipes.md from them (schema.py, docs.py).
The rules for what its env mappings may hold live here too: secrets read from the engine's
environment (secret_env.py, the engine's half of harness/recipe/secret_env.py) and names that
change every process of the run (unsafe_env.py)."""
