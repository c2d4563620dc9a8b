"""Reference-JSON and TensorBoard readers, and how a run dir picks its reader."""

from __future__ import annotations

import json
import math
import struct

import pytest

from harness.metrics import MetricsError, read_metrics


def test_reference_json_with_string_steps(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({
        "train/reward": {"11": 0.5, "10": 0.25, "12": "n/a"},
        "train/loss": {"10": 1.0},
        "run_id": "abc",
    }) + "\n")
    metrics = read_metrics(path)
    assert list(metrics["train/reward"].items())[:2] == [(10, 0.25), (11, 0.5)]
    assert math.isnan(metrics["train/reward"][12])  # "n/a" is no number: NaN, never dropped
    assert "run_id" not in metrics and metrics.last_step == 12


def test_reference_json_keeps_nan(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"loss": {"1": NaN, "2": 1.0}}')
    assert math.isnan(read_metrics(path)["loss"][1])


@pytest.mark.parametrize("text, message", [
    ('{"a": {"one": 1.0}}', "step 'one' is not an integer"),
    ('{"a": {"--1": 1.0}}', "step '--1' is not an integer"),
    ("[1, 2]", "expected an object"),
    ('{"a": {"1": 1.0}', "not valid JSON"),
])
def test_reference_json_errors(tmp_path, text, message):
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(MetricsError, match=message):
        read_metrics(path)


def _scalar_event(step: int, tag: str, value: float):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    return event_pb2.Event(step=step, wall_time=1.0, summary=summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]))


def _tensor_event(step: int, tag: str, value: float):
    """A TF2-style scalar (what tf.summary / newer writers emit): a 0-d double tensor."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2

    tensor = tensor_pb2.TensorProto(dtype=2, tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                    tensor_content=struct.pack("<d", value))
    return event_pb2.Event(step=step, summary=summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor)]))


def _write_events(logdir, events, suffix=""):
    pytest.importorskip("tensorboard")
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logdir), filename_suffix=suffix)
    for event in events:
        writer.add_event(event)
    writer.close()


def test_tensorboard_scalars_from_a_nested_run_dir(tmp_path):
    logdir = tmp_path / "tensorboard" / "exp_001"
    logdir.mkdir(parents=True)
    _write_events(logdir, [_scalar_event(s, "train/reward", s / 4) for s in (1, 2, 3)]
                  + [_tensor_event(2, "train/loss", 0.125)])
    metrics = read_metrics(tmp_path)
    assert metrics["train/reward"] == {1: 0.25, 2: 0.5, 3: 0.75}
    assert metrics["train/loss"] == {2: 0.125}
    assert metrics.notes == ()


def test_tensorboard_torn_final_record_is_dropped_with_a_note(tmp_path):
    _write_events(tmp_path, [_scalar_event(s, "a", float(s)) for s in (1, 2, 3)])
    (path,) = list(tmp_path.glob("events.out.tfevents.*"))
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    metrics = read_metrics(path)
    assert metrics["a"] == {1: 1.0, 2: 2.0}
    assert "torn record" in metrics.notes[0]


def test_jsonl_wins_over_event_files_and_format_forces_a_reader(tmp_path):
    _write_events(tmp_path, [_scalar_event(1, "tb_only", 1.0)])
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "jsonl_only": 2.0}\n')
    assert list(read_metrics(tmp_path)) == ["jsonl_only"]
    assert list(read_metrics(tmp_path, format="tensorboard")) == ["tb_only"]
    with pytest.raises(MetricsError, match=r"looked for metrics.json\)"):
        read_metrics(tmp_path, format="reference_json")


def test_garbage_event_file_is_an_error(tmp_path):
    pytest.importorskip("tensorboard")
    path = tmp_path / "events.out.tfevents.1.host"
    payload = b"\xff" * 12
    path.write_bytes(struct.pack("<QI", len(payload), 0) + payload + b"\0\0\0\0")
    with pytest.raises(MetricsError, match="not a TensorBoard event"):
        read_metrics(tmp_path)
