"""Stamp a bench's JSON lines with date, machine and commit, and append them to its results file.

    python3 bench/megatron_gpu.py ... | python3 bench/record.py --out bench/results/train.jsonl \
        --command "bash bench/gpu.sh train ..."

Every stdin line is echoed to stdout; each line that is a JSON object becomes one row of --out:
`{"date", "machine", "commit", "command", **figures}`. The machine is what nvidia-smi reports
("2 x NVIDIA H200"; `BENCH_MACHINE` overrides it), the commit is `BENCH_COMMIT` or the checkout's
`git rev-parse --short HEAD` (the GPU machine's copy of the tree has no .git: pass it), else null.
A figure's history is the rows of its file, oldest first (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter


def _output(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):  # no such tool here: the stamp says null
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def machine() -> str | None:
    """"N x GPU name" from nvidia-smi, or BENCH_MACHINE."""
    if os.environ.get("BENCH_MACHINE"):
        return os.environ["BENCH_MACHINE"]
    names = _output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if not names:
        return None
    return ", ".join(f"{n} x {name}" for name, n in Counter(names.splitlines()).items())


def commit() -> str | None:
    return os.environ.get("BENCH_COMMIT") or _output(["git", "rev-parse", "--short", "HEAD"])


def stamp(line: str, *, command: str, stamps: dict) -> dict | None:
    """The row for one output line, or None for a line that is not a JSON object."""
    if not line.startswith("{"):
        return None
    try:
        figures = json.loads(line)
    except json.JSONDecodeError:
        return None
    return {**stamps, "command": command, **figures} if isinstance(figures, dict) else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="results file to append to (JSON lines)")
    p.add_argument("--command", required=True, help="the command that reproduces these figures")
    args = p.parse_args()
    stamps = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(), "commit": commit()}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    rows = 0
    for line in sys.stdin:
        sys.stdout.write(line)
        row = stamp(line.strip(), command=args.command, stamps=stamps)
        if row is not None:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            rows += 1
    print(f"record: {rows} row(s) -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
