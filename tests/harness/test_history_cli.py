"""`harness history RECIPE`: the trend table, each run's gate, and the band the next run meets."""

from __future__ import annotations

from harness.cli import main
from harness.history import HistoryRow, append

STEP_TIMES = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 13.0]  # the last night is slow


def fill(db, recipe: str = "qwen3_5_35b") -> None:
    for i, step in enumerate(STEP_TIMES):
        append(db, HistoryRow(time=f"2026-11-{i + 1:02d}T02:00:00+00:00", suite="nightly", entry="qwen3_5_35b",
                              recipe=recipe, recipe_path=f"/repo/recipes/{recipe}.yaml", commit_sha=f"{i:040x}",
                              hardware="h200", verdict="pass", final_reward=0.6, step_time_s=step,
                              tokens_per_s=1000.0, wall_s=3600.0 + i))


def test_trend_marks_the_planted_regression(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    fill(db)
    fill(db, recipe="arith_grpo_cpu")
    assert main(["history", "qwen3_5_35b", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:9]
    assert header.split()[:4] == ["time", "entry", "hw", "commit"]
    assert all("qwen3_5_35b" in r for r in rows)
    assert rows[0].endswith("-")                     # no history before the first night
    assert rows[6].endswith("ok")                    # the 7th night is inside the band
    assert rows[7].endswith("step regression")       # 13 s against ~10 s
    assert "8 of 8 runs shown" in lines[9]
    assert any("qwen3_5_35b on h200: step_time_s band [" in line and "of 8 runs" in line for line in lines)


def test_last_and_recipe_file_and_filters(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    fill(db)
    assert main(["history", "recipes/qwen3_5_35b.yaml", "--db", str(db), "--last", "2", "--k", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].endswith("ok") and "2 of 8 runs shown" in lines[3] and "median +/- 100 x" in lines[3]
    assert main(["history", "qwen3_5_35b", "--db", str(db), "--hardware", "h100"]) == 2
    assert "no runs of 'qwen3_5_35b' on h100" in capsys.readouterr().err
    assert main(["history", "qwen3_5_35b", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "no history yet" in capsys.readouterr().err
