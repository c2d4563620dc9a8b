"""The `rl` engine: GRPO on Ray with torch and megatron-core backends.

It reads one resolved recipe and writes one run dir; it never imports `harness`.
"""

__version__ = "0.1.0"
