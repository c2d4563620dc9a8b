"""Property: any doubtful change to a passing run dir makes `harness check` exit non-zero.

A passing synthetic run dir (metrics.jsonl, status.json, invariants.jsonl, recipe.yaml and its
thresholds file) is mutated at random: a metrics line or one metric at one step dropped, a value
made NaN/inf/null/a string/a boolean, steps reordered or repeated, a line truncated, a status
field tampered with, an invariant's ok flipped, a file removed. Each must fail (issue 12).
The thresholds read every step of every metric, so any damaged step is evidence they see.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from unittest import mock

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main

STEPS = 6
METRICS = ("train/reward", "train/loss")
THRESHOLDS = {"recipe": "mut", "checks": [
    {"name": "reward", "expr": "mean(train/reward) > 0.1", "why": "test", "since": "2026-11-30"},
    {"name": "loss", "expr": "all_finite(train/loss) and max(train/loss) < 10", "why": "test", "since": "2026-11-30"},
]}
BAD_VALUES = [math.nan, math.inf, -math.inf, None, "x", "nan", True, False, [], {}]


def _rows() -> list[dict]:
    return [{"step": s, "train/reward": 0.1 + 0.05 * s, "train/loss": 1.0 / s} for s in range(1, STEPS + 1)]


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def build() -> dict[str, object]:
    """The files of a passing run dir, as name -> content (text, a record list, or a JSON object)."""
    recipe = {"name": "mut", "engine": "rl", "algorithm": {"num_steps": STEPS}, "data_plane": {"backend": "legacy"},
              "env": {}, "checks": {"thresholds": "{run}/thresholds.yaml", "invariants": True}}
    return {
        "metrics.jsonl": _rows(),
        "invariants.jsonl": [{"check": "flops_fields", "ok": True, "step": s} for s in range(1, STEPS + 1)],
        "status.json": {"state": "completed", "exit_code": 0, "error": None, "dead_worker": None,
                        "last_step": STEPS, "num_steps": STEPS, "wall_s": 1.0},
        "recipe.yaml": yaml.safe_dump(recipe),
        "thresholds.yaml": yaml.safe_dump(THRESHOLDS),
    }


def write(run: Path, files: dict[str, object]) -> None:
    for name, content in files.items():
        if isinstance(content, list):
            content = _lines(content)
        elif isinstance(content, dict):
            content = json.dumps(content)
        (run / name).write_text(content.replace("{run}", str(run)))


def check(files: dict[str, object]) -> int:
    """`harness check` through its CLI entry point; the report and the verdict files are skipped for speed."""
    with tempfile.TemporaryDirectory() as tmp, mock.patch("harness.commands.check.write_verdict_files"):
        write(Path(tmp), files)
        return main(["check", tmp, "--no-report"])


# --- mutations: each takes the files and a draw function, and changes the files -------------

def drop_line(files, draw):
    rows = files["metrics.jsonl"]
    del rows[draw(st.integers(0, len(rows) - 1))]


def drop_metric(files, draw):
    rows = files["metrics.jsonl"]
    row = rows[draw(st.integers(0, len(rows) - 1))]
    row.pop(draw(st.sampled_from(METRICS)), None)


def bad_value(files, draw):
    rows = files["metrics.jsonl"]
    row = rows[draw(st.integers(0, len(rows) - 1))]
    row[draw(st.sampled_from(METRICS))] = draw(st.sampled_from(BAD_VALUES))


def reorder(files, draw):
    rows = files["metrics.jsonl"]
    how = draw(st.sampled_from(["swap", "duplicate", "reverse"]))
    i = draw(st.integers(0, len(rows) - 2))
    if how == "swap":
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
    elif how == "duplicate":
        rows.insert(i + 1, dict(rows[i]))
    else:
        rows.reverse()


def truncate_line(files, draw):
    name = draw(st.sampled_from(["metrics.jsonl", "invariants.jsonl"]))
    lines = _lines(files[name]).splitlines(keepends=True)
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = lines[i][: draw(st.integers(1, len(lines[i]) - 2))] + draw(st.sampled_from(["", "\n"]))
    files[name] = "".join(lines)


def tamper_status(files, draw):
    status = files["status.json"]
    key, value = draw(st.sampled_from([
        ("state", "failed"), ("state", "running"), ("state", None), ("state", "Completed"),
        ("exit_code", 1), ("exit_code", None), ("exit_code", "0"), ("exit_code", False), ("exit_code", 0.0),
        ("error", "OOM"), ("dead_worker", "policy-1"), ("last_step", STEPS - 1), ("last_step", "6"),
        ("num_steps", STEPS + 1), ("num_steps", True), ("state", "__delete__"), ("exit_code", "__delete__"),
    ]))
    if value == "__delete__":
        del status[key]
    else:
        status[key] = value


def flip_invariant(files, draw):
    record = files["invariants.jsonl"][draw(st.integers(0, STEPS - 1))]
    record["ok"] = draw(st.sampled_from([False, "false", "true", 0, 1, None]))


def remove_file(files, draw):
    del files[draw(st.sampled_from(sorted(files)))]


MUTATIONS = [drop_line, drop_metric, bad_value, reorder, truncate_line, tamper_status, flip_invariant, remove_file]


def test_an_untouched_run_dir_passes():
    assert check(build()) == 0


@settings(max_examples=60, deadline=None)
@given(mutation=st.sampled_from(MUTATIONS), data=st.data())
def test_any_doubtful_change_fails(mutation, data):
    """One mutation per example: two could cancel out (repeat a line, then drop the repeat)."""
    files = build()
    mutation(files, data.draw)
    assert check(files) != 0
