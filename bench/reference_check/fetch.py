"""Fetch the reference system's check script for benchmarking; none of its code is committed here.

    python bench/reference_check/fetch.py                      # download the pinned file
    python bench/reference_check/fetch.py --git-dir CLONE.git  # or take it from a local clone

Writes bench/.work/reference/check_metrics.py (git-ignored), verifies its SHA-256, and makes sure
an interpreter with `rich` (its one dependency) exists: the current one if it has rich, else a
venv at bench/.work/reference/venv. Prints that interpreter's path on the last line.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import subprocess
import sys
import urllib.request
import venv
from pathlib import Path

REPO = "NVIDIA-NeMo/RL"
COMMIT = "7ea279abfbeb698b092856d0dab61e7cf39bc909"
PATH_IN_REPO = "tests/check_metrics.py"
SHA256 = "df25b74c8d6991318005f6dc7ce10b7458101675395d03c4c1494c3be52c3ced"
URL = f"https://raw.githubusercontent.com/{REPO}/{COMMIT}/{PATH_IN_REPO}"
WORK = Path(__file__).resolve().parents[1] / ".work" / "reference"


def _download() -> bytes:
    with urllib.request.urlopen(URL, timeout=30) as response:
        return response.read()


def _from_git(git_dir: Path) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{PATH_IN_REPO}"], check=True, capture_output=True
    ).stdout


def fetch_script(git_dir: Path | None = None) -> Path:
    """The verified reference script in bench/.work/reference/, fetched if not already there."""
    target = WORK / "check_metrics.py"
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == SHA256:
        return target
    data = _from_git(git_dir) if git_dir else _download()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{PATH_IN_REPO} at {COMMIT[:12]} has SHA-256 {digest}, expected {SHA256}")
    WORK.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def reference_python() -> str:
    """An interpreter that can run the script: this one if it has `rich`, else a fresh venv."""
    if importlib.util.find_spec("rich") is not None:
        return sys.executable
    env_dir = WORK / "venv"
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "rich"], check=True)
    return str(python)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", type=Path, help="a local clone's git dir to read the file from")
    args = parser.parse_args()
    print(fetch_script(args.git_dir))
    print(reference_python())


if __name__ == "__main__":
    main()
