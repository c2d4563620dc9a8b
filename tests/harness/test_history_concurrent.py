"""Two `harness nightly` runs at once share one history database: no row lost, none corrupted.

Two processes (not threads: separate SQLite connections, separate locks, as two nightly
commands or two xdist workers are) append rows as fast as they can, first opening a fresh
database together (both create the schema at once).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from harness.history import query

WRITER = textwrap.dedent("""\
    import sys
    import time
    from pathlib import Path
    from harness.history import HistoryRow, append
    db, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    Path(sys.argv[4]).touch()
    while not Path(sys.argv[5]).exists():
        time.sleep(0.005)
    for i in range(count):
        append(db, HistoryRow(time=f"t{i}", suite="faults", entry=name, recipe="r", recipe_path="r.yaml",
                              commit_sha="c" * 40, hardware="cpu", verdict="pass", verdicts={"check": i % 2 == 0},
                              attempts=1, final_reward=i / 7, step_time_s=float(i), wall_s=1.5, run_dir=f"{name}/{i}"))
""")
COUNT = 80


def test_two_processes_append_at_once_and_every_row_is_there_whole(tmp_path):
    db, go = tmp_path / "history.sqlite", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), name, str(COUNT), str(tmp_path / name), str(go)],
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    while not all((tmp_path / name).exists() for name in ("a", "b")):
        assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs]
        time.sleep(0.01)
    go.touch()  # both start writing at the same moment
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    rows = query(db)
    assert len(rows) == 2 * COUNT and len({r.id for r in rows}) == 2 * COUNT
    for name in ("a", "b"):
        mine = [r for r in rows if r.entry == name]
        assert [r.run_dir for r in mine] == [f"{name}/{i}" for i in range(COUNT)]  # each writer's order kept
        for i, r in enumerate(mine):
            assert (r.final_reward, r.step_time_s, r.verdicts) == (i / 7, float(i), {"check": i % 2 == 0})
            assert r.commit_sha == "c" * 40 and r.wall_s == 1.5 and r.verdict == "pass"
    integrity = subprocess.run([sys.executable, "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1])"
                                ".execute('PRAGMA integrity_check').fetchone()[0])", str(db)],
                               capture_output=True, text=True, check=True)
    assert integrity.stdout.strip() == "ok"
