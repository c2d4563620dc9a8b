"""A failure's cause reaches the reader whole: in a pipe, on a wide terminal, in junit.xml (issue 35, item 1)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.checks.failure_cause import failure_cause
from harness.checks.verdict import Verdict
from harness.cli import main
from harness.console import format_verdicts

# What rl.cluster writes for a worker that raised, as Ray 2.60 renders the worker's exception.
RAY_CRASH = ("RuntimeError: worker policy-1 failed: \x1b[36mray::PolicyWorker.step()\x1b[39m "
             "(pid=4242, ip=10.0.0.7, actor_id=5d1f, repr=PolicyWorker(rank=1))\n"
             '  File "rl/workers/policy.py", line 120, in step\n'
             "    loss = self.backend.train(batch)\n"
             '  File "rl/backends/torch.py", line 88, in train\n'
             "    raise ValueError(msg)\n"
             "ValueError: micro-batch of 3 rows does not divide the 4 data-parallel ranks\n"
             "second line of the message")
CAUSE = ("RuntimeError: worker policy-1 failed: "
         "ValueError: micro-batch of 3 rows does not divide the 4 data-parallel ranks")
LONG = " ".join(f"word{i:03d}" for i in range(60))  # 479 characters, no line break


def _long_verdicts() -> list[Verdict]:
    return [Verdict(name="reward_high", kind="threshold", ok=False, message=LONG),
            Verdict(name="run_completed", kind="completion", ok=True, message="first line\nsecond line")]


def test_in_a_pipe_each_line_of_a_reason_is_written_whole(capsys):
    table = format_verdicts(_long_verdicts())  # capsys's stdout is not a terminal
    lines = table.splitlines()
    assert lines[1].endswith(LONG) and len(lines[1]) > 400
    assert lines[2].endswith("first line") and lines[3].strip() == "second line"
    assert lines[3].index("second line") == lines[2].index("first line")  # under the reason column


def test_on_a_200_column_terminal_a_reason_wraps_to_the_width_and_loses_no_word(monkeypatch, capsys):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")
    table = format_verdicts(_long_verdicts())
    lines = table.splitlines()
    assert all(len(line) <= 200 for line in lines)
    assert max(len(line) for line in lines) > 150  # the width is used, not 96
    column = lines[1].index("word000")
    reason_lines = [lines[1][column:]] + [line[column:] for line in lines[2:] if line[:column].isspace()][:2]
    assert " ".join(reason_lines) == LONG


def test_a_narrow_terminal_still_shows_every_word(monkeypatch, capsys):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "60")
    table = format_verdicts(_long_verdicts())
    assert " ".join(table.split()).count("word") == 60


def test_a_worker_crash_is_its_first_exception_line_without_escapes():
    assert failure_cause(RAY_CRASH) == CAUSE


def test_other_errors_lose_only_their_escapes():
    tail = "the engine exited with code 1; last lines of engine.log:\n\x1b[31mOSError: disk full\x1b[0m"
    assert failure_cause(tail) == "the engine exited with code 1; last lines of engine.log:\nOSError: disk full"


def _crashed_run(tmp_path):
    run = write_run(tmp_path / "a-run-dir-whose-name-is-long-enough-to-push-things-right", steps=3, planned=5)
    (run / "status.json").write_text(json.dumps({"state": "failed", "exit_code": 1, "error": RAY_CRASH,
                                                 "last_step": 3, "num_steps": 5, "wall_s": 3.0}))
    (run / "engine.log").write_text(RAY_CRASH + "\n")
    return run


def test_check_of_a_worker_crash_names_the_cause_and_engine_log(tmp_path, capsys):
    run = _crashed_run(tmp_path)
    assert main(["check", str(run), "--no-report"]) == 1
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if "run_completed" in line]
    assert f"run state is 'failed' at step 3: {CAUSE} (engine output: {run / 'engine.log'})" in line
    assert "\x1b" not in out
    [case] = [c for c in ET.parse(run / "junit.xml").getroot().iter("testcase") if c.get("name") == "run_completed"]
    failure = case.find("failure")
    assert CAUSE in failure.get("message") and str(run / "engine.log") in failure.get("message")
    assert "second line of the message" in failure.text and 'rl/backends/torch.py", line 88' in failure.text
    assert "\x1b" not in failure.text and "\\x1b" not in failure.text


def test_compare_shows_run_bs_value_whole(tmp_path, capsys):
    a = write_run(tmp_path / "run-a-with-a-rather-long-name-for-the-first-side-of-the-comparison")
    b = write_run(tmp_path / "run-b-with-a-rather-long-name-for-the-second-side-of-the-comparison",
                  reward=lambda s: 0.1 * s + 1.2345678901234567e-9)
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert f"{b.name}={0.1 + 1.2345678901234567e-9!r}" in out
