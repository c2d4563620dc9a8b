"""MetricsTail: torn last lines, corrupt lines, rewrites."""

from __future__ import annotations

import json

from harness.launch.tail import MetricsTail


def append(path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_missing_file_reads_nothing(tmp_path):
    tail = MetricsTail(tmp_path / "metrics.jsonl")
    assert tail.poll() == 0 and tail.last_step == 0 and tail.reward is None


def test_torn_line_is_completed_on_the_next_poll(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append(path, json.dumps({"step": 1, "train/reward": 0.1}) + "\n" + '{"step": 2, "train/re')
    tail = MetricsTail(path)
    assert tail.poll() == 1 and tail.last_step == 1 and tail.reward == 0.1
    append(path, 'ward": 0.5}\n')
    assert tail.poll() == 1 and tail.last_step == 2 and tail.reward == 0.5
    assert tail.num_bad_lines == 0


def test_corrupt_complete_lines_are_counted_and_skipped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append(path, '{"step": 1}\nnot json\n[1, 2]\n\n{"step": 3, "train/reward": 1}\n')
    tail = MetricsTail(path)
    assert tail.poll() == 2 and tail.last_step == 3 and tail.num_bad_lines == 2


def test_final_poll_takes_a_complete_last_line_without_newline_and_drops_a_torn_one(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append(path, '{"step": 1}\n{"step": 2}')
    tail = MetricsTail(path)
    assert tail.poll() == 1
    assert tail.poll(final=True) == 1 and tail.last_step == 2
    other = tmp_path / "torn.jsonl"
    append(other, '{"step": 1}\n{"step": 9, "x')
    torn = MetricsTail(other)
    assert torn.poll(final=True) == 1 and torn.last_step == 1 and torn.num_bad_lines == 0


def test_a_file_that_shrank_is_read_from_the_start(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append(path, '{"step": 1, "train/reward": 0.1}\n{"step": 2, "train/reward": 0.2}\n')
    tail = MetricsTail(path)
    tail.poll()
    path.write_text('{"step": 1, "train/reward": 0.7}\n')
    assert tail.poll() == 1 and tail.reward == 0.7


def test_boolean_step_and_non_numeric_reward_are_ignored(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append(path, '{"step": true, "train/reward": "high"}\n')
    tail = MetricsTail(path)
    assert tail.poll() == 1 and tail.last_step == 0 and tail.reward is None
