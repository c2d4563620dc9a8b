"""Time the whole `harness check` CLI beside the reference's check script, same data, same checks.

    python bench/bench_check.py                                  # fetches the reference script
    python bench/bench_check.py --git-dir path/to/RL/.git        # offline: reference from a clone
    python bench/bench_check.py --no-reference                   # ours only

Generates a seeded run of --steps steps x --metrics metrics into bench/.work/: the reference's
{metric: {step: value}} JSON, and with the same numbers a run dir as `harness run` leaves it
(metrics.jsonl, the resolved recipes/arith_grpo_cpu.yaml with num_steps = --steps, status.json,
invariants.jsonl) and a thresholds file holding the same --checks as the reference's arguments.

Each command then runs in a fresh process (wall time including interpreter start and exit), the
two sides alternating, --repeats times each; the table gives median, min and max:
* ours, verdict: `harness check RUN --no-report`, the verdict table, result.json and junit.xml
  (deleted before each run, and required to exist after it), plus what the reference does not
  do: completion, coverage and invariant checks;
* the reference: tests/check_metrics.py on the JSON, its rich table;
* ours, with report: `harness check RUN`, also report.md and one PNG per checked metric.
The verdicts (exit codes) must agree. The last line is the acceptance ratio: ours (verdict)
over the reference, medians; --max-ratio makes the bench exit 1 above it.

harness/ is byte-compiled first, as `pip install` does: an editable install under
PYTHONDONTWRITEBYTECODE=1 would otherwise compile every harness module on every run. The row
"ours, verdict, no byte-code cache" shows that case (the reference is one script, compiled on
every run either way; its dependency `rich` comes byte-compiled from its wheel).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work"
RUN = WORK / "run"
RECIPE = ROOT / "recipes" / "arith_grpo_cpu.yaml"
sys.path.insert(0, str(ROOT / "bench" / "reference_check"))
sys.path.insert(0, str(ROOT))

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


def generate(steps: int, num_metrics: int, seed: int) -> tuple[list[dict], Path]:
    """A seeded run: named metrics the checks read plus filler; its rows and the reference's JSON."""
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
    reference = WORK / "metrics.json"
    reference.write_text(json.dumps({name: {str(row["step"]): row[name] for row in rows} for name in names}))
    return rows, reference


def make_run_dir(rows: list[dict], checks: list[str]) -> Path:
    """RUN as `harness run` leaves it, for the resolved CPU recipe stretched to len(rows) steps."""
    from harness.checks.invariants import required_checks
    from harness.recipe import dump_recipe, load_recipe

    thresholds = WORK / "thresholds.yaml"
    recipe = load_recipe(RECIPE, [f"algorithm.num_steps={len(rows)}", f"checks.thresholds={thresholds}"]).data
    lines = [f"recipe: {recipe['name']}", "checks:"]
    for i, expr in enumerate(checks):
        lines += [f"  - name: check_{i}", f"    expr: {json.dumps(expr)}", "    why: bench_check.py, generated data",
                  "    since: 2026-12-01"]
    thresholds.write_text("\n".join(lines) + "\n")
    RUN.mkdir(parents=True, exist_ok=True)
    for stale in RUN.glob("*"):
        if stale.is_file():
            stale.unlink()
    (RUN / "recipe.yaml").write_text(dump_recipe(recipe))
    (RUN / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    status = {"state": "completed", "exit_code": 0, "last_step": len(rows), "num_steps": len(rows), "wall_s": 1.0,
              "error": None, "dead_worker": None}
    (RUN / "status.json").write_text(json.dumps(status, indent=2) + "\n")
    (RUN / "invariants.jsonl").write_text("".join(json.dumps({"check": kind, "ok": True, "step": 1}) + "\n"
                                                  for kind in required_checks(recipe)))
    return RUN


def run_once(command: list[str], env: dict | None = None, *, writes: tuple[Path, ...] = ()) -> tuple[float, int]:
    """Wall seconds of one fresh run and its exit code; each of `writes` must be (re)written by it."""
    for path in writes:
        path.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{command[:4]} crashed:\n{done.stderr[-2000:]}")
    missing = [path.name for path in writes if not path.exists()]
    if missing:
        raise SystemExit(f"{command[:4]} did not write {missing}:\n{done.stdout[-2000:]}")
    return elapsed, done.returncode


def timed(commands: dict[str, tuple], repeats: int) -> dict[str, tuple[list[float], int]]:
    """Each command `repeats` times, round-robin (so load drifting on a shared box hits all alike)."""
    times: dict[str, list[float]] = {label: [] for label in commands}
    codes: dict[str, set[int]] = {label: set() for label in commands}
    for _ in range(repeats):
        for label, (command, env, writes) in commands.items():
            elapsed, code = run_once(command, env, writes=writes)
            times[label].append(elapsed)
            codes[label].add(code)
    for label, seen in codes.items():
        if len(seen) != 1:
            raise SystemExit(f"{label}: exit code changed between runs: {seen}")
    return {label: (times[label], codes[label].pop()) for label in commands}


def row(label: str, times: list[float], note: str) -> str:
    return f"| {label} | {statistics.median(times):.3f} | {min(times):.3f} | {max(times):.3f} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--checks", type=int, default=len(CHECK_PAIRS), choices=range(1, len(CHECK_PAIRS) + 1))
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--report-repeats", type=int, default=3, help="runs of the full check with report.md")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--git-dir", type=Path, help="take the reference script from a local clone")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--max-ratio", type=float, help="exit 1 when ours (verdict) / the reference exceeds this")
    args = parser.parse_args()

    rows, reference_json = generate(args.steps, args.metrics, args.seed)
    pairs = CHECK_PAIRS[: args.checks]
    run_dir = make_run_dir(rows, [ours for _, ours in pairs])
    compileall.compile_dir(ROOT / "harness", quiet=1)
    python = sys.executable
    cli = [python, "-m", "harness.cli", "check", str(run_dir)]
    verdict_files = (run_dir / "result.json", run_dir / "junit.xml")
    no_cache = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="bench-check-nocache-")}
    commands: dict[str, tuple] = {
        "python -c pass": ([python, "-c", "pass"], None, ()),
        "ours, verdict": ([*cli, "--no-report"], None, verdict_files),
    }
    if not args.no_reference:
        from fetch import fetch_script, reference_python

        script, ref_python = fetch_script(args.git_dir), reference_python()
        commands["reference"] = ([ref_python, str(script), str(reference_json), *(ref for ref, _ in pairs)], None, ())
    commands["ours, verdict, no byte-code cache"] = ([*cli, "--no-report"], no_cache, verdict_files)
    results = timed(commands, args.repeats)
    full, full_code = timed({"full": (cli, None, (*verdict_files, run_dir / "report.md"))}, args.report_repeats)["full"]

    ours_code = results["ours, verdict"][1]
    if full_code != ours_code or ("reference" in results and results["reference"][1] != ours_code):
        raise SystemExit(f"verdicts differ: {({label: code for label, (_, code) in results.items()}, full_code)}")
    notes = {
        "python -c pass": "interpreter start alone",
        "ours, verdict": "`harness check RUN --no-report`: verdict, result.json, junit.xml",
        "reference": "tests/check_metrics.py: eval() of the same checks on the JSON, rich table",
        "ours, verdict, no byte-code cache": "the same, every harness module compiled on each run",
    }
    lines = [
        f"`harness check` of a {args.steps:,}-step run with {args.metrics} metrics, {len(pairs)} checks; "
        f"wall seconds per invocation (fresh process, interpreter start and exit included), "
        f"{args.repeats} runs each, alternating; Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end.",
        "",
        "| what | median s | min s | max s | note |",
        "|---|---|---|---|---|",
    ]
    lines += [row(label, times, notes[label]) for label, (times, _) in results.items()]
    lines.append(row(f"ours, with report ({args.report_repeats} runs)", full,
                     "`harness check RUN`: also report.md and its plots"))
    print("\n".join(lines))
    print(f"\nAll checks {'passed' if ours_code == 0 else 'did not pass'} on both sides.")
    if "reference" in results:
        ratio = statistics.median(results["ours, verdict"][0]) / statistics.median(results["reference"][0])
        print(f"ratio ours (verdict) / reference, medians: {ratio:.2f}x (acceptance: <= 1.0x)")
        if args.max_ratio is not None and ratio > args.max_ratio:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
