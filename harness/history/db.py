"""The run history: one SQLite row per suite entry run (`harness nightly`) or `harness run`.

SQLite because it is one local file, needs no server, and several pytest-xdist workers can
append to it at once (each append is one short transaction; writers wait up to 30 s for the
lock). The default file is runs/history.sqlite; CI keeps it between nights as an artifact or a
cache. Rows are never updated: the history is what happened.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

DEFAULT_DB = Path("runs") / "history.sqlite"
SCHEMA_VERSION = 2
# columns each version added (an older file gains them, empty, when it is opened)
ADDED = {2: ("generation_tokens_per_s", "train_tokens_per_s", "mfu", "peak_memory_gib", "refit_s")}
VERDICTS = ("pass", "fail", "error", "skip")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    suite TEXT NOT NULL,
    entry TEXT NOT NULL,
    recipe TEXT NOT NULL,
    recipe_path TEXT NOT NULL,
    commit_sha TEXT,
    hardware TEXT NOT NULL,
    verdict TEXT NOT NULL,
    verdicts TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    final_reward REAL,
    step_time_s REAL,
    tokens_per_s REAL,
    wall_s REAL,
    run_dir TEXT,
    generation_tokens_per_s REAL,
    train_tokens_per_s REAL,
    mfu REAL,
    peak_memory_gib REAL,
    refit_s REAL
);
CREATE INDEX IF NOT EXISTS runs_by_entry ON runs (entry, hardware, id);
CREATE INDEX IF NOT EXISTS runs_by_recipe ON runs (recipe, id);
"""


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """One run of one suite entry. `verdicts` maps check name -> passed."""

    time: str
    suite: str
    entry: str
    recipe: str
    recipe_path: str
    commit_sha: str | None
    hardware: str
    verdict: str
    verdicts: dict[str, bool] = field(default_factory=dict)
    attempts: int = 1
    final_reward: float | None = None
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    wall_s: float | None = None
    run_dir: str | None = None
    generation_tokens_per_s: float | None = None
    train_tokens_per_s: float | None = None
    mfu: float | None = None
    peak_memory_gib: float | None = None
    refit_s: float | None = None
    id: int | None = None

    def __post_init__(self) -> None:
        assert self.verdict in VERDICTS, self.verdict


_COLUMNS = tuple(f.name for f in fields(HistoryRow) if f.name != "id")


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """An open database with our schema; the parent folder is created if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=30.0)) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if not 0 <= version <= SCHEMA_VERSION:
            raise ValueError(f"{path}: history schema version {version}, this harness reads up to {SCHEMA_VERSION}")
        if version:  # an older file: add the columns later versions brought
            with conn:
                for added in range(version + 1, SCHEMA_VERSION + 1):
                    for column in ADDED[added]:
                        conn.execute(f"ALTER TABLE runs ADD COLUMN {column} REAL")
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        yield conn


def append(path: Path, row: HistoryRow) -> int:
    """Append `row`; returns its id."""
    values = asdict(row)
    values["verdicts"] = json.dumps(values["verdicts"], sort_keys=True)
    with connect(path) as conn, conn:
        cursor = conn.execute(
            f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})",
            [values[c] for c in _COLUMNS])
        return int(cursor.lastrowid)


def query(path: Path, *, recipe: str | None = None, entry: str | None = None, hardware: str | None = None,
          suite: str | None = None, last: int | None = None) -> list[HistoryRow]:
    """Matching rows, oldest first; `recipe` matches the recipe name or the stem of its path."""
    if not Path(path).exists():
        return []
    where, args = [], []
    if recipe is not None:
        where.append("(recipe = ? OR recipe_path = ? OR recipe_path LIKE ?)")
        args += [recipe, recipe, f"%/{Path(recipe).stem}.yaml"]
    for column, value in (("entry", entry), ("hardware", hardware), ("suite", suite)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    sql = "SELECT id, " + ", ".join(_COLUMNS) + " FROM runs"
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC"
    if last is not None:
        sql += f" LIMIT {int(last)}"
    with connect(Path(path)) as conn:
        rows = conn.execute(sql, args).fetchall()
    out = []
    for record in reversed(rows):
        data = dict(zip(("id",) + _COLUMNS, record))
        data["verdicts"] = json.loads(data["verdicts"])
        out.append(HistoryRow(**data))
    return out


def current_commit(cwd: Path | None = None) -> str | None:
    """The commit under test: $HARNESS_COMMIT when set (a copy of the tree whose .git is absent or
    stale: the GPU machine's, where bench/gpu_setup.sh sets it from BENCH_COMMIT), $GITHUB_SHA in
    CI, else `git rev-parse HEAD`, else None."""
    for name in ("HARNESS_COMMIT", "GITHUB_SHA"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None
