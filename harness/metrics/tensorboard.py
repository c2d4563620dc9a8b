"""Read scalar series from TensorBoard event files, for engines that log only to TensorBoard.

The record framing (TFRecord) is read here; only the Event protobuf comes from the `tensorboard`
package, imported when event files are actually present, so `harness check` on our own
metrics.jsonl never pays for it. A record cut short at the end of a file (a crash mid-write) is
dropped with a note, like a torn jsonl line.
"""

from __future__ import annotations

import struct
from pathlib import Path

from harness.bounded import BoundedReadError, read_bytes
from harness.metrics.series import Metrics, MetricsError

EVENT_GLOB = "events.out.tfevents.*"
_HEADER = struct.Struct("<QI")  # record length, masked CRC of the length
_FOOTER_SIZE = 4  # masked CRC of the data
_FLOAT_DTYPES = {1: "<f", 2: "<d", 3: "<i", 9: "<q"}  # DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64


def find_event_files(run_dir: Path, *, max_depth: int = 4) -> list[Path]:
    """Event files under run_dir (TensorBoard writers nest them a few folders down), sorted."""
    found = []
    for path in run_dir.rglob(EVENT_GLOB):
        if path.is_file() and len(path.relative_to(run_dir).parts) <= max_depth + 1:
            found.append(path)
    return sorted(found)


def _records(data: bytes, path: Path, notes: list[str]):
    offset = 0
    while offset < len(data):
        if offset + _HEADER.size > len(data):
            notes.append(f"{path}: ignored a torn record at byte {offset}")
            return
        length, _ = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + length + _FOOTER_SIZE
        if end > len(data):
            notes.append(f"{path}: ignored a torn record at byte {offset}")
            return
        yield data[offset + _HEADER.size : offset + _HEADER.size + length]
        offset = end


def _scalar(value) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    tensor = value.tensor
    fmt = _FLOAT_DTYPES.get(tensor.dtype)
    if fmt is None or len(tensor.tensor_shape.dim) != 0:
        return None
    if tensor.tensor_content:
        return float(struct.unpack(fmt, tensor.tensor_content[: struct.calcsize(fmt)])[0])
    for repeated in (tensor.float_val, tensor.double_val, tensor.int_val, tensor.int64_val):
        if len(repeated):
            return float(repeated[0])
    return None


def read_event_files(paths: list[Path], *, source: str, follow_symlinks: bool = True) -> Metrics:
    """Merge the scalar summaries of event files (in name order; a later file wins a step).
    A run dir's own files are read with follow_symlinks=False (harness.bounded)."""
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise MetricsError(
            f"{source}: has TensorBoard event files but the `tensorboard` package is not installed "
            "(pip install 'recipe-harness[tensorboard]')"
        ) from None
    rows: dict[str, dict[int, float]] = {}
    notes: list[str] = []
    for path in paths:
        try:
            data = read_bytes(path, kind="events", follow_symlinks=follow_symlinks)
        except BoundedReadError as exc:
            raise MetricsError(f"cannot read {exc}") from None
        for index, record in enumerate(_records(data, path, notes)):
            event = event_pb2.Event()
            try:
                event.ParseFromString(record)
            except Exception as exc:  # protobuf's DecodeError has no stable import path
                raise MetricsError(f"{path}: record {index} is not a TensorBoard event ({exc})") from None
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                number = _scalar(value)
                if number is not None:
                    rows.setdefault(value.tag, {})[int(event.step)] = number
    return Metrics.from_rows(rows, source=source, notes=tuple(notes))
