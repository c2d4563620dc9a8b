"""Retries: only unfinished runs whose engine.log matches an infrastructure signature.

A stand-in for `harness run` (a few lines of Python) plays each case, so these stay fast.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from harness.nightly import run_entry
from harness.suites import Entry

FAKE_HARNESS = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    args = sys.argv[1:]
    out = Path(args[args.index("--out") + 1])
    mode = Path(args[1]).stem  # the "recipe" file name says what to play
    counter = out.parent / f".{mode}.count"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if mode == "badinput":
        print("error: recipe.yaml:3: algorithm.num_stepz: unknown key"); sys.exit(2)
    out.mkdir(parents=True)
    logs = {"flaky": "OSError: [Errno 98] Address already in use", "crash": "ValueError: a bug of ours",
            "slowcheck": "OSError: [Errno 98] Address already in use"}
    (out / "engine.log").write_text(logs.get(mode, "fine") + "\\n")
    passed = mode == "good" or (mode == "flaky" and n >= 2)
    state = "completed" if passed or mode == "slowcheck" else "failed"
    (out / "status.json").write_text(json.dumps({"state": state, "wall_s": 1.0}))
    print(f"attempt {n}")
    sys.exit(0 if passed else 1)
""")


def play(tmp_path: Path, mode: str, retries: int = 1):
    fake = tmp_path / "fake_harness.py"
    fake.write_text(FAKE_HARNESS)
    entry = Entry(id=mode, recipe=tmp_path / f"{mode}.yaml", hardware="cpu")
    return run_entry(entry, out_dir=tmp_path / "out", max_retries=retries, timeout_s=30,
                     harness=(sys.executable, str(fake)))


def test_a_pass_is_one_attempt_with_its_output_in_harness_log(tmp_path):
    result = play(tmp_path, "good")
    assert result.verdict == "pass" and len(result.attempts) == 1
    run_dir = Path(result.final.run_dir)
    assert run_dir == tmp_path / "out" / "good"
    assert (run_dir / "harness.log").read_text() == "attempt 1\n"
    assert result.command[-2:] == ["--out", str(run_dir)] and "--no-progress" in result.command


def test_infrastructure_failure_is_retried_in_a_new_run_dir(tmp_path):
    result = play(tmp_path, "flaky")
    first, second = result.attempts
    assert (first.retried, first.infra, first.state) == (True, "port_in_use", "failed")
    assert first.infra_line == "OSError: [Errno 98] Address already in use"
    assert Path(second.run_dir).name == "flaky.retry1" and second.exit_code == 0
    assert result.verdict == "pass"
    assert json.loads((Path(first.run_dir) / "status.json").read_text())["state"] == "failed"  # evidence kept


def test_retries_run_out(tmp_path):
    result = play(tmp_path, "flaky", retries=0)
    assert len(result.attempts) == 1 and result.verdict == "fail"
    assert result.final.infra == "port_in_use" and not result.final.retried


def test_a_failure_of_our_own_is_not_retried(tmp_path):
    result = play(tmp_path, "crash", retries=3)
    assert len(result.attempts) == 1 and result.final.infra is None and result.verdict == "fail"


def test_a_completed_run_failing_a_check_is_not_retried_even_with_a_matching_line(tmp_path):
    result = play(tmp_path, "slowcheck", retries=3)
    assert len(result.attempts) == 1 and result.final.state == "completed" and result.final.infra is None


def test_bad_input_is_an_error_not_retried(tmp_path):
    result = play(tmp_path, "badinput", retries=3)
    assert len(result.attempts) == 1 and result.verdict == "error" and result.final.state is None
    assert "unknown key" in (Path(result.final.run_dir) / "harness.log").read_text()


def test_a_hung_harness_is_stopped_at_the_timeout(tmp_path):
    fake = tmp_path / "hang.py"
    fake.write_text("import time\ntime.sleep(60)\n")
    entry = Entry(id="hang", recipe=tmp_path / "hang.yaml", hardware="cpu")
    result = run_entry(entry, out_dir=tmp_path / "out", max_retries=1, timeout_s=0.5,
                       harness=(sys.executable, str(fake)))
    assert len(result.attempts) == 1 and result.final.exit_code < 0 and result.verdict == "error"
    assert result.final.wall_s < 30  # stopped, not left to sleep its 60 s (a generous upper bound)
