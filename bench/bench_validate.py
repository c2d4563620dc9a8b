"""Time `harness validate recipes/` (every recipe at full scale and as its tiny twin, plus suites).

    python bench/bench_validate.py [--repeats 7]

Each run is a fresh subprocess, so the figure includes interpreter start and imports: what a
CI job or a developer pays. The reference system has no validator to compare with (its recipes
fail only once their GPU job starts); `python -c pass` is printed as the floor.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    recipes = len([p for p in (ROOT / "recipes").rglob("*.yaml") if "_base" not in p.parts])
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        (f"harness validate recipes/ ({recipes} files)", [sys.executable, "-m", "harness.cli", "validate", "recipes"]),
    ]
    print(f"machine: {platform.node()} {platform.machine()}, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}, median of {args.repeats}\n")
    print("| command | median s | min s | max s |\n|---|---|---|---|")
    for label, cmd in rows:
        t = timed(cmd, args.repeats)
        print(f"| {label} | {statistics.median(t):.3f} | {min(t):.3f} | {max(t):.3f} |")


if __name__ == "__main__":
    main()
