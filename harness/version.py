"""The harness's version: the installed package's, else the checkout's pyproject.toml.

A fresh clone run as `python -m harness.cli` with the checkout on PYTHONPATH has no installed
metadata; its pyproject.toml says the same thing, stated once there.
"""

from __future__ import annotations

from pathlib import Path

DISTRIBUTION = "recipe-harness"  # pyproject.toml's [project] name
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def harness_version() -> str:
    """`0.1.0`: importlib.metadata's, else pyproject.toml's, else `unknown` (neither can be read)."""
    from importlib import metadata  # noqa: PLC0415 - only for --version

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    import tomllib  # noqa: PLC0415

    try:
        with PYPROJECT.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):  # a checkout without it: say so, do not fail
        return "unknown"
