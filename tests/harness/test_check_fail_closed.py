"""`harness check` and `harness compare` fail closed on a doubtful run dir (issue 12).

Each case is a run dir that used to exit 0, hang or crash; each must now be a failed check with
its reason (exit 1) or one line of bad input (exit 2).
"""

from __future__ import annotations

import json
import os

import pytest
import yaml
from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.cli import main


def _reasons(run) -> str:
    """Every verdict's reason, as result.json holds it."""
    return "\n".join(v["message"] for v in json.loads((run / "result.json").read_text())["verdicts"])


def _rewrite_metrics(run, rows):
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_metric_that_stops_being_logged_fails_naming_it_and_the_step(tmp_path, capsys):
    """Completion counted the union of steps: reward at 1-5 of 10 exited 0 (item 2)."""
    run = write_run(tmp_path / "run", steps=10, planned=10)
    _rewrite_metrics(run, [{"step": s, "train/loss": 1.0 / s, **({"train/reward": 0.1 * s} if s <= 5 else {})}
                           for s in range(1, 11)])
    assert main(["check", str(run)]) == 1
    assert "train/reward has no value at step 6" in _reasons(run)


def test_a_nan_loss_written_by_the_old_engine_fails_all_finite(tmp_path, capsys):
    """The engine wrote "nan" as a string and the reader dropped it (item 1)."""
    run = write_run(tmp_path / "run")
    _rewrite_metrics(run, [{"step": s, "train/reward": 0.1 * s, "train/loss": "nan" if s == 3 else 1.0}
                           for s in range(1, 6)])
    assert main(["check", str(run)]) == 1
    assert "train/loss is nan at step 3" in _reasons(run)


@pytest.mark.parametrize("change", [{"exit_code": 1}, {"error": "boom"}, {"dead_worker": "policy-0"},
                                    {"last_step": 3}, {"exit_code": None}])
def test_an_inconsistent_completed_status_exits_1(tmp_path, capsys, change):
    run = write_run(tmp_path / "run")
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, **change}))
    assert main(["check", str(run)]) == 1
    assert "status.json says 'completed'" in _reasons(run)


@pytest.mark.parametrize("ok", ['"false"', "0", "null"])
def test_an_invariant_whose_ok_is_not_true_exits_1(tmp_path, ok):
    run = write_run(tmp_path / "run")
    with (run / "invariants.jsonl").open("a") as f:
        f.write('{"check": "flops_fields", "ok": %s, "step": 5}\n' % ok)
    assert main(["check", str(run)]) == 1


def test_a_torn_failing_invariant_record_exits_1_naming_the_line(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    with (run / "invariants.jsonl").open("a") as f:
        f.write('{"check": "flops_fields", "ok": false, "detail": "missing total_fl')
    assert main(["check", str(run)]) == 1
    assert "invariants.jsonl:6: not a JSON record" in _reasons(run)


def test_steps_out_of_order_exit_1_naming_the_line(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    rows = [{"step": s, "train/reward": 0.1 * s, "train/loss": 1.0} for s in (1, 2, 4, 3, 5)]
    _rewrite_metrics(run, rows)
    assert main(["check", str(run)]) == 1
    assert "metrics.jsonl:4: step 3 after step 4" in _reasons(run)


def test_another_recipes_thresholds_are_refused_with_exit_2(tmp_path, capsys):
    """The thresholds file's recipe: was never compared with the run's (item 6)."""
    run = write_run(tmp_path / "run")
    other = tmp_path / "other.yaml"
    data = yaml.safe_load((tmp_path / "thresholds.yaml").read_text())
    other.write_text(yaml.safe_dump({**data, "recipe": "someone_else"}))
    assert main(["check", str(run), "--thresholds", str(other)]) == 2
    err = capsys.readouterr().err
    assert "thresholds are for recipe 'someone_else', not 'r'" in err and err.count("\n") == 1


def test_a_check_that_reads_no_metric_is_exit_2(tmp_path, capsys):
    run = write_run(tmp_path / "run", thresholds="recipe: r\nchecks:\n  - name: x\n    expr: '1 < 2'\n"
                                                 "    why: w\n    since: 2026-11-30\n")
    assert main(["check", str(run)]) == 2
    assert "check 'x' reads no metric" in capsys.readouterr().err


def _make_special(path, special):
    path.unlink(missing_ok=True)
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(special)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("name, code", [("status.json", 1), ("invariants.jsonl", 1), ("metrics.jsonl", 1),
                                        ("recipe.yaml", 2)])
def test_a_run_file_that_is_no_regular_file_is_answered_in_one_line(tmp_path, capsys, special, name, code):
    """A FIFO hung forever, /dev/zero read until MemoryError (item 9); a symlink is not followed."""
    run = write_run(tmp_path / "run")
    _make_special(run / name, special)
    assert main(["check", str(run)]) == code
    out = capsys.readouterr()
    expected = "not a regular file" if special == "fifo" else "a symlink"
    assert expected in (out.err if code == 2 else _reasons(run)) and "Traceback" not in out.err


@pytest.mark.timeout(30)
def test_a_thresholds_path_that_is_a_fifo_is_exit_2(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    _make_special(tmp_path / "thresholds.yaml", "fifo")
    assert main(["check", str(run)]) == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["name: r\nchecks: {}\n", "name: r\nalgorithm: {num_steps: .inf}\n",
                                  "name: r\nalgorithm: {num_steps: true}\n", "- a\n", "name: [\n",
                                  "name: r\nalgorithm: {num_steps: 5}\nchecks: [1]\n"])
def test_a_damaged_recipe_yaml_is_one_line_exit_2(tmp_path, capsys, text):
    """KeyError and OverflowError before (item 9)."""
    run = write_run(tmp_path / "run")
    (run / "recipe.yaml").write_text(text)
    assert main(["check", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_a_4300_digit_integer_in_metrics_is_a_failure_not_a_crash(tmp_path, capsys):
    run = write_run(tmp_path / "run")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "train/loss": 1%s}\n' % ("0" * 4400))
    assert main(["check", str(run)]) == 1
    assert "metrics.jsonl:6: not readable as numbers" in _reasons(run)


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-inf", "-0.1"])
def test_compare_refuses_a_tolerance_that_is_not_a_finite_non_negative_number(tmp_path, capsys, tolerance):
    """--tolerance nan passed `< 0` (item 8)."""
    run = write_run(tmp_path / "a")
    assert main(["compare", str(run), str(run), f"--tolerance={tolerance}"]) == 2
    assert "--tolerance must be a finite number >= 0" in capsys.readouterr().err
