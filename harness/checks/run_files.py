"""Read a run dir's recipe.yaml and status.json: bounded, and checked for the fields we use.

Both come from a run dir we do not control; neither is followed if it is a symlink, and a
duplicate key in status.json is a failure, not "the last one wins". A FIFO, /dev/zero or a damaged file in their place
must give a one-line answer, never a hang, a MemoryError or a KeyError. The recipe is the
harness's own input (which steps and thresholds apply), so a bad one is a UsageError (exit 2);
status.json is the engine's account of the run, so a bad one is a failed run, with its reason.
"""

from __future__ import annotations

from pathlib import Path

from harness.bounded import BoundedReadError, read_text
from harness.errors import UsageError, capped_line, shown
from harness.strict_json import DuplicateKeyError, loads
from harness.yamlsafe import RECIPE, YamlError, load_text


class StatusError(ValueError):
    """status.json cannot be read as a JSON object: the run fails with this reason."""


def _is_int(value: object) -> bool:
    return type(value) is int


def read_status(run_dir: Path) -> dict | None:
    """status.json as a dict; None when there is none. Raises StatusError saying why not."""
    path = run_dir / "status.json"
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = loads(read_text(path, kind="status", follow_symlinks=False))
    except BoundedReadError as exc:
        raise StatusError(f"status.json: {exc.reason}") from None
    except DuplicateKeyError as exc:
        raise StatusError(f"status.json:{exc.line}: duplicate key {shown(exc.key)}: a run's status says "
                          "each thing once") from None
    except ValueError as exc:  # JSONDecodeError, too many keys, or an integer too long to convert
        raise StatusError(f"status.json is not valid JSON ({capped_line(str(exc), 200)})") from None
    except RecursionError:
        raise StatusError("status.json is nested too deeply") from None
    if not isinstance(data, dict):
        raise StatusError(f"status.json is not a JSON object (a {type(data).__name__})")
    return data


def read_yaml(path: Path) -> object:
    """A run dir's YAML file (bounded, alias-bomb safe, not a symlink). Raises UsageError, one line."""
    try:
        return load_text(read_text(path, kind="recipe", follow_symlinks=False), name=str(path), dialect=RECIPE)[0]
    except (BoundedReadError, YamlError) as exc:
        raise UsageError(str(exc)) from None


def _need(ok: bool, path: Path, key: str, what: str) -> None:
    if not ok:
        raise UsageError(f"{path}: {key} must be {what}")


def read_run_recipe(run_dir: Path) -> dict | None:
    """The run's resolved recipe.yaml; None when there is none. Raises UsageError (one line)."""
    path = run_dir / "recipe.yaml"
    if not path.exists() and not path.is_symlink():
        return None
    data = read_yaml(path)
    _need(isinstance(data, dict), path, "the file", "a resolved recipe (a mapping)")
    _need(isinstance(data.get("name"), str) and bool(data["name"]), path, "name", "non-empty text")
    algorithm = data.get("algorithm")
    _need(isinstance(algorithm, dict), path, "algorithm", "a mapping")
    steps = algorithm.get("num_steps")
    _need(_is_int(steps) and 1 <= steps <= 10**9, path, "algorithm.num_steps", "an integer in [1, 1e9]")
    checks = data.setdefault("checks", {})
    _need(isinstance(checks, dict), path, "checks", "a mapping")
    thresholds = checks.get("thresholds")
    _need(thresholds is None or (isinstance(thresholds, str) and bool(thresholds)), path, "checks.thresholds",
          "a path")
    hardware = checks.get("hardware")
    _need(hardware is None or isinstance(hardware, str), path, "checks.hardware", "a hardware class")
    for key in ("data_plane", "env"):
        _need(isinstance(data.get(key, {}), dict), path, key, "a mapping")
    return data


__all__ = ["StatusError", "read_run_recipe", "read_status", "read_yaml"]
