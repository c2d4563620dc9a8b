"""Time `harness check`-equivalent evaluation beside the reference's check script, same data.

    python bench/bench_check.py                                  # fetches the reference script
    python bench/bench_check.py --git-dir path/to/RL/.git        # offline: reference from a clone
    python bench/bench_check.py --no-reference                   # ours only

Generates a seeded run of --steps steps x --metrics metrics into bench/.work/ (as our
metrics.jsonl and, with the same numbers, the reference's {metric: {step: value}} JSON), then
times each command in a fresh subprocess: wall time including interpreter start, the median of
--repeats runs. Both sides evaluate the same --checks equivalent checks, and the verdicts (exit
codes) must agree. Prints a markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work"
sys.path.insert(0, str(ROOT / "bench" / "reference_check"))

# (reference syntax, ours): equivalent checks that hold on the generated data.
CHECK_PAIRS = [
    ('mean(data["train/reward"], -6, -1) > 0.5', "mean(train/reward, -6, -1) > 0.5"),
    ('mean(data["train/reward"], -100) > mean(data["train/reward"], 1, 101)',
     "mean(train/reward, -100) > mean(train/reward, 1, 101)"),
    ('median(data["train/loss"], -500) < 1.0', "median(train/loss, -500) < 1.0"),
    ('mean(data["train/loss"], ignore_top_p=0.05) < 1.5', "mean(train/loss, trim=0.05) < 1.5"),
    ('max(data["train/gen_kl_error"]) < 0.01', "max(train/gen_kl_error) < 0.01"),
    ('min(data["train/reward"]) > -1', "min(train/reward) > -1"),
    ('ratio_above(data["train/grad_norm"], 5.0) < 0.05', "ratio_above(train/grad_norm, 5.0) < 0.05"),
    ('mean(data["timing/train/total"]) < 10', "mean(timing/train/total) < 10"),
    ('median(data["train/reward"], 1, 1001) < 0.5', "median(train/reward, 1, 1001) < 0.5"),
    ('max(data["train/loss"]) < 5', "max(train/loss) < 5"),
]

# What `harness check` does for thresholds: read the run, evaluate each check, exit non-zero on a failure.
OURS = """\
import sys
from harness.metrics import read_metrics
from harness.thresholds import evaluate
metrics = read_metrics(sys.argv[1])
results = [evaluate(expr, metrics, expected_steps=int(sys.argv[2])) for expr in sys.argv[3:]]
for expr, result in zip(sys.argv[3:], results):
    print("PASS" if result.ok else "FAIL", result.reason)
sys.exit(0 if all(result.ok for result in results) else 1)
"""


def generate(steps: int, num_metrics: int, seed: int) -> tuple[Path, Path]:
    """A seeded run: named metrics the checks read plus filler, as jsonl and as reference JSON."""
    rng = random.Random(seed)
    names = ["train/reward", "train/loss", "train/gen_kl_error", "train/grad_norm", "timing/train/total"]
    names += [f"extra/metric_{i}" for i in range(num_metrics - len(names))]
    rows = []
    for step in range(1, steps + 1):
        progress = step / steps
        row = {
            "train/reward": 0.2 + 0.6 * progress + rng.gauss(0, 0.05),
            "train/loss": 1.0 - 0.5 * progress + abs(rng.gauss(0, 0.1)),
            "train/gen_kl_error": rng.uniform(0.0005, 0.003),
            "train/grad_norm": abs(rng.gauss(1.0, 0.5)) + (20.0 if rng.random() < 0.01 else 0.0),
            "timing/train/total": rng.uniform(2.0, 4.0),
        }
        row.update({name: rng.random() for name in names[5:]})
        rows.append({"step": step, **{name: round(row[name], 6) for name in names}})
    WORK.mkdir(parents=True, exist_ok=True)
    jsonl = WORK / "metrics.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    reference = WORK / "metrics.json"
    reference.write_text(json.dumps({name: {str(row["step"]): row[name] for row in rows} for name in names}))
    return jsonl, reference


def timed(command: list[str], repeats: int) -> tuple[list[float], int]:
    """Wall times of `repeats` fresh runs and the (identical across runs) exit code."""
    times, codes = [], set()
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        codes.add(done.returncode)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{command[:3]} crashed:\n{done.stderr[-2000:]}")
    assert len(codes) == 1, f"exit code changed between runs: {codes}"
    return times, codes.pop()


def in_process(jsonl: Path, checks: list[str], steps: int, repeats: int) -> list[float]:
    """Our reader + checks without interpreter start, for the breakdown."""
    sys.path.insert(0, str(ROOT))
    from harness.metrics import read_metrics
    from harness.thresholds import evaluate

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        metrics = read_metrics(jsonl)
        assert all(evaluate(expr, metrics, expected_steps=steps).ok for expr in checks)
        times.append(time.perf_counter() - start)
    return times


def row(label: str, times: list[float], note: str) -> str:
    return f"| {label} | {statistics.median(times):.3f} | {min(times):.3f} | {max(times):.3f} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--checks", type=int, default=len(CHECK_PAIRS), choices=range(1, len(CHECK_PAIRS) + 1))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--git-dir", type=Path, help="take the reference script from a local clone")
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()

    jsonl, reference_json = generate(args.steps, args.metrics, args.seed)
    pairs = CHECK_PAIRS[: args.checks]
    ours = [expr for _, expr in pairs]
    python = sys.executable
    lines = [
        f"Checks of a {args.steps:,}-step run with {args.metrics} metrics, {len(pairs)} checks; "
        f"wall seconds per `check` invocation (fresh process, incl. interpreter start), {args.repeats} runs; "
        f"Python {platform.python_version()}, {platform.machine()}.",
        "",
        "| what | median s | min s | max s | note |",
        "|---|---|---|---|---|",
    ]
    bare, _ = timed([python, "-c", "pass"], args.repeats)
    lines.append(row("python -c pass", bare, "interpreter start alone"))
    times, ours_code = timed([python, "-c", OURS, str(jsonl), str(args.steps), *ours], args.repeats)
    lines.append(row("ours: metrics.jsonl", times, "harness.metrics + harness.thresholds"))
    times, code = timed([python, "-c", OURS, str(reference_json), str(args.steps), *ours], args.repeats)
    assert code == ours_code
    lines.append(row("ours: reference JSON", times, "same reader path on the reference's format"))
    lines.append(row("ours: in-process", in_process(jsonl, ours, args.steps, args.repeats), "read + evaluate, no interpreter start"))
    if not args.no_reference:
        from fetch import fetch_script, reference_python

        script, ref_python = fetch_script(args.git_dir), reference_python()
        times, ref_code = timed([ref_python, str(script), str(reference_json), *(ref for ref, _ in pairs)], args.repeats)
        if ref_code != ours_code:
            raise SystemExit(f"verdicts differ: reference exit {ref_code}, ours {ours_code}")
        lines.append(row("reference: check_metrics.py", times, "eval() of the same checks; rich table output"))
    print("\n".join(lines))
    print(f"\nAll checks {'passed' if ours_code == 0 else 'did not pass'} on both sides.")


if __name__ == "__main__":
    main()
