"""Write `rl/assets/data/word_math/{train,validation}.jsonl`, the flagship tiny twins' math dataset.

Run from the repository root after changing it, then commit the output:

    python rl/assets/data/make_word_math.py

Rows are `{"problem": "Mia has 3 pens and finds 4 more. How many pens now?", "answer": "7"}`:
every sum of two single digits, each told by a few seeded templates from a bare `3+4` to a
two-sentence story, so prompts run from 3 to about 60 characters (tokens, for the twins'
character-level tokenizer), as a real dataset's differ in length; a seeded fifth is held out for
validation. Single digits keep the arithmetic learnable by a toy model in a CI run; the length
spread is what exercises the padded data path. Every answer is checked with the math task's
verifier (`rl.envs.math.verify_answer`) before it is written.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 0
VALIDATION_FRACTION = 0.2
TEMPLATES_PER_SUM = 4
NAMES = ("Mia", "Leo", "Ava", "Sam", "Zoe", "Ben")
THINGS = ("pens", "cats", "books", "cups", "hats", "eggs")
TEMPLATES = (
    "{a}+{b}",
    "What is {a}+{b}?",
    "Add {a} and {b}.",
    "{n} has {a} {t} and gets {b} more. Total?",
    "{n} has {a} {t} and finds {b} more. How many {t} now?",
    "A box holds {a} {t}. {n} puts in {b} more. How many {t} are in the box?",
)


def rows() -> list[dict]:
    rng = random.Random(SEED)
    out = []
    for a in range(10):
        for b in range(10):
            for template in rng.sample(TEMPLATES, TEMPLATES_PER_SUM):
                text = template.format(a=a, b=b, n=rng.choice(NAMES), t=rng.choice(THINGS))
                out.append({"problem": text, "answer": str(a + b)})
    return out


def check(all_rows: list[dict]) -> None:
    """Every answer is what the math verifier accepts for its own boxed form."""
    from rl.envs.math import boxed, verify_answer

    for row in all_rows:
        if not verify_answer(row["answer"], boxed(row["answer"])):
            raise ValueError(f"the math verifier rejects the answer of {row}")


def write(out_dir: Path) -> None:
    all_rows = rows()
    check(all_rows)
    random.Random(SEED).shuffle(all_rows)
    n_val = int(len(all_rows) * VALIDATION_FRACTION)
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, part in (("validation", all_rows[:n_val]), ("train", all_rows[n_val:])):
        (out_dir / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "word_math")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
