"""A duplicate JSON key in a run dir is a failure naming file:line and key (issue 32, items 3, 9, 10).

json.loads keeps the last of two equal keys, so each of these read as a clean run (exit 0), and
`compare` was fooled the same way; compare also passed two runs whose status said failed.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.checks.run_files import StatusError, read_status
from harness.cli import main
from harness.metrics import MetricsError, read_metrics
from harness.strict_json import MAX_KEYS, MAX_LINE_BYTES, DuplicateKeyError, TooManyKeysError, loads


def _reasons(run) -> str:
    return "\n".join(v["message"] for v in json.loads((run / "result.json").read_text())["verdicts"])


def test_a_metrics_line_that_sets_a_key_twice_fails_naming_line_and_key(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[3] = '{"step": 4, "train/loss": NaN, "train/reward": 0.4, "train/loss": 0.25}'
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["check", str(run)]) == 1
    assert "metrics.jsonl:4: duplicate key 'train/loss'" in _reasons(run)


def test_a_torn_last_line_is_forgiven_but_a_whole_duplicate_last_line_is_not(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "a": 1.0}\n{"step": 2, "a": NaN, "a": 0.5}')  # no newline: a whole object
    with pytest.raises(MetricsError, match="metrics.jsonl:2: duplicate key 'a'"):
        read_metrics(path)
    path.write_text('{"step": 1, "a": 1.0}\n{"step": 2, "a": 0.')
    assert read_metrics(path).notes


def test_a_status_that_says_failed_then_completed_fails(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    (run / "status.json").write_text('{"state": "failed", "exit_code": 1, "last_step": 5, "num_steps": 5,\n'
                                     ' "state": "completed", "exit_code": 0}\n')
    assert main(["check", str(run)]) == 1
    assert "status.json:2: duplicate key 'state'" in _reasons(run)


def test_a_nested_key_of_the_same_name_is_no_duplicate(tmp_path):
    (tmp_path / "status.json").write_text('{"state": "completed", "variants": {"a": {"state": "failed"}}}')
    assert read_status(tmp_path)["variants"]["a"]["state"] == "failed"
    (tmp_path / "status.json").write_text('{"variants": {"a": {"state": 1, "state": 2}}}')
    with pytest.raises(StatusError, match="status.json:1: duplicate key 'state'"):
        read_status(tmp_path)


def test_an_invariant_record_that_says_false_then_true_fails(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    with (run / "invariants.jsonl").open("a") as f:
        f.write('{"check": "dispatch_row_order", "ok": false, "step": 5, "ok": true}\n')
    assert main(["check", str(run)]) == 1
    assert "invariants.jsonl:6: duplicate key 'ok'" in _reasons(run)


def test_compare_is_not_fooled_by_a_duplicate_key(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    lines = (b / "metrics.jsonl").read_text().splitlines()
    lines[1] = lines[1][:-1] + ', "train/loss": 0.5}'
    (b / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["compare", str(a), str(b)]) == 2
    assert "metrics.jsonl:2: duplicate key 'train/loss'" in capsys.readouterr().err


@pytest.mark.parametrize("failed", [("a",), ("a", "b")])
def test_compare_fails_unless_both_runs_completed(tmp_path, capsys, failed):
    runs = {name: write_run(tmp_path / name, state="failed" if name in failed else "completed")
            for name in ("a", "b")}
    assert main(["compare", str(runs["a"]), str(runs["b"])]) == 1
    out = capsys.readouterr().out
    for name in ("a", "b"):
        row = next(line for line in out.splitlines() if f"run_completed:{name}" in line)
        assert row.startswith("FAIL" if name in failed else "PASS"), row


def test_a_metrics_line_past_the_length_cap_is_refused_before_parsing(tmp_path):
    """A 480 MB line of 30 M distinct keys took 64 s and 5.2 GB; the cap is found without parsing."""
    keys = ", ".join(f'"k{i}": 0' for i in range(2 * MAX_LINE_BYTES // 8))
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "a": 1.0}\n{"step": 2, ' + keys + "}\n")
    with pytest.raises(MetricsError, match=f"metrics.jsonl:2: a line of more than {MAX_LINE_BYTES} bytes"):
        read_metrics(tmp_path)


def test_an_object_of_too_many_keys_is_refused(tmp_path):
    keys = ", ".join(f'"k{i}": 0' for i in range(MAX_KEYS + 1))
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, ' + keys + "}\n")
    with pytest.raises(MetricsError, match=f"metrics.jsonl:1: an object with {MAX_KEYS + 2} keys"):
        read_metrics(tmp_path)
    with pytest.raises(TooManyKeysError):
        loads("{" + keys + "}")


_KEYS = st.text(max_size=8)
_VALUES = st.none() | st.booleans() | st.integers() | st.text(max_size=8)


@given(st.dictionaries(_KEYS, st.recursive(_VALUES, lambda inner: st.dictionaries(_KEYS, inner, max_size=3)
                                                              | st.lists(inner, max_size=3), max_leaves=10)))
def test_loads_agrees_with_json_when_no_key_repeats(data):
    text = json.dumps(data, indent=1)
    assert loads(text) == json.loads(text)


@given(st.lists(_KEYS, min_size=1, max_size=6, unique=True), st.data())
def test_a_repeated_key_is_found_on_its_line(keys, data):
    again = data.draw(st.sampled_from(keys))
    pairs = [*keys, again]
    text = "{\n" + ",\n".join(f"{json.dumps(k)}: {i}" for i, k in enumerate(pairs)) + "\n}"
    with pytest.raises(DuplicateKeyError) as info:
        loads(text)
    assert info.value.key == again and info.value.line == len(pairs) + 1
