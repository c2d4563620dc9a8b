"""Write `rl/assets/data/tiny_math/{train,validation}.jsonl`, the tiny twins' math dataset.

Run from the repository root after changing it, then commit the output:

    python rl/assets/data/make_tiny_math.py

Rows are `{"problem": "3+4", "answer": "7"}`: every sum of two single digits, a seeded fifth of
them held out for validation. The full-scale recipes read a Hugging Face math dataset with the
same two roles (prompt and reference answer); the twins read this one through the same loader
and grade with the same verifier, small enough that a tiny model learns it in a CI run. Every
problem has the same character length, so every prompt has the same token length (a batch with
no padding; `word_math` is the mixed-length set).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 0
VALIDATION_FRACTION = 0.2


def rows() -> list[dict]:
    return [{"problem": f"{a}+{b}", "answer": str(a + b)} for a in range(10) for b in range(10)]


def write(out_dir: Path) -> None:
    all_rows = rows()
    random.Random(SEED).shuffle(all_rows)
    n_val = int(len(all_rows) * VALIDATION_FRACTION)
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, part in (("validation", all_rows[:n_val]), ("train", all_rows[n_val:])):
        (out_dir / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "tiny_math")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
