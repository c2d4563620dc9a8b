"""read_metrics: one entry point that finds a run's metrics and picks the reader for them."""

from __future__ import annotations

from pathlib import Path

from harness.metrics.jsonl import read_jsonl
from harness.metrics.reference_json import read_reference_json
from harness.metrics.series import Metrics, MetricsError
from harness.metrics.tensorboard import EVENT_GLOB, find_event_files, read_event_files

FORMATS = ("jsonl", "tensorboard", "reference_json")
JSONL_NAME = "metrics.jsonl"
REFERENCE_NAME = "metrics.json"


def _format_of_file(path: Path) -> str:
    if path.name.startswith(EVENT_GLOB[:-1]):
        return "tensorboard"
    if path.suffix == ".jsonl":
        return "jsonl"
    if path.suffix == ".json":
        return "reference_json"
    raise MetricsError(f"{path}: unknown metrics file type (expected *.jsonl, *.json or {EVENT_GLOB})")


def _read_file(path: Path, fmt: str) -> Metrics:
    if fmt == "jsonl":
        return read_jsonl(path)
    if fmt == "reference_json":
        return read_reference_json(path)
    return read_event_files([path], source=str(path))


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()   # a dangling symlink too: refused, not passed over


def _read_dir(run_dir: Path, fmt: str | None) -> Metrics:
    # exists(), not is_file(): a FIFO or device in a metrics file's place is read, and refused
    # with its reason by harness.bounded, rather than passed over for another format.
    # A run dir's files are read as they are: one that is a symlink (to another run's) is refused.
    if fmt in (None, "jsonl") and _present(run_dir / JSONL_NAME):
        return read_jsonl(run_dir / JSONL_NAME, follow_symlinks=False)
    if fmt in (None, "tensorboard"):
        events = find_event_files(run_dir)
        if events:
            return read_event_files(events, source=str(run_dir), follow_symlinks=False)
    if fmt in (None, "reference_json") and _present(run_dir / REFERENCE_NAME):
        return read_reference_json(run_dir / REFERENCE_NAME, follow_symlinks=False)
    looked = {"jsonl": JSONL_NAME, "tensorboard": EVENT_GLOB, "reference_json": REFERENCE_NAME}
    wanted = [looked[fmt]] if fmt else list(looked.values())
    raise MetricsError(f"{run_dir}: no metrics found (looked for {', '.join(wanted)})")


def read_metrics(path: str | Path, *, format: str | None = None) -> Metrics:
    """Read a run dir or a metrics file into Metrics (metric -> {step: value}, ordered by step).

    Args:
        path: a run dir (metrics.jsonl, else TensorBoard event files, else metrics.json) or a file.
        format: one of FORMATS to skip detection (an external engine's `metrics:` setting).

    Raises:
        MetricsError: one line naming the file (and line) that could not be read.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    path = Path(path)
    if path.is_dir():
        return _read_dir(path, format)
    if not path.exists():
        raise MetricsError(f"{path}: no such file or directory")
    return _read_file(path, format or _format_of_file(path))
