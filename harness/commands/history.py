"""`harness history RECIPE [--db FILE] [--entry ID] [--hardware H] [--last N]`.

The trend of a recipe's nightly runs, oldest first: verdict, reward, step time, tokens/s and
wall time per run, each run's performance gate (step time, tokens/s and the per-phase GPU numbers)
against the runs before it, and the current noise bands. RECIPE is a recipe name (`qwen3_5_35b`) or its file.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from harness.errors import USER_ERRORS, UsageError
from harness.history import HistoryRow, gate_run, noise_band, query
from harness.history.gate import ALWAYS, GATED, baseline
from harness.suites import find_suite, load_suite
from harness.suites.model import Gate


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def gate_marks(rows: list[HistoryRow], gate: Gate) -> list[str]:
    """Each row's gate, judged against the rows before it (as the nightly did when it ran)."""
    marks = []
    for i, row in enumerate(rows):
        results = gate_run(row, rows[:i], gate)
        flagged = [f"{r.metric.split('_')[0]} {r.status}" for r in results if r.status in ("regression", "improved")]
        marks.append(", ".join(flagged) or ("ok" if any(r.status == "ok" for r in results) else "-"))
    return marks


def format_trend(rows: list[HistoryRow], gate: Gate) -> str:
    header = ("time", "entry", "hw", "commit", "verdict", "att", "reward", "step s", "tok/s/GPU", "wall s", "gate")
    table = [header]
    for row, mark in zip(rows, gate_marks(rows, gate)):
        table.append((row.time.replace("+00:00", "Z"), row.entry, row.hardware, (row.commit_sha or "-")[:10],
                      row.verdict, str(row.attempts), _num(row.final_reward), _num(row.step_time_s),
                      _num(row.tokens_per_s), _num(row.wall_s, ".0f"), mark))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table) + "\n"


def format_bands(rows: list[HistoryRow], gate: Gate) -> list[str]:
    """The band the next run of each (entry, hardware) will be held to."""
    lines = []
    for entry, hardware in sorted({(r.entry, r.hardware) for r in rows}):
        probe = HistoryRow(time="", suite="", entry=entry, recipe="", recipe_path="", commit_sha=None,
                           hardware=hardware, verdict="pass")
        for metric in GATED:
            values = baseline(rows, probe, metric, gate.window)
            if not values and metric not in ALWAYS:  # a per-phase number this entry never logged
                continue
            if len(values) < gate.min_runs:
                lines.append(f"{entry} on {hardware}: {metric}: {len(values)} passing runs, the gate needs "
                             f"{gate.min_runs}")
                continue
            band = noise_band(values, k=gate.k, rel_floor=gate.rel_floor)
            lines.append(f"{entry} on {hardware}: {metric} band [{band.low:.4g}, {band.high:.4g}] "
                         f"(median {band.centre:.4g} of {band.count} runs)")
    return lines


def gate_for(suite_name: str, args: argparse.Namespace) -> Gate:
    """The gate of the suite that ran the latest row (if its file is here), then any flags on top."""
    try:
        gate = load_suite(find_suite(suite_name)).gate
    except USER_ERRORS:
        gate = Gate()
    flags = {k: getattr(args, k) for k in ("window", "min_runs", "k", "rel_floor") if getattr(args, k) is not None}
    return replace(gate, **flags)


def main(args: argparse.Namespace) -> int:
    db = Path(args.db)
    if not db.exists():
        raise UsageError(f"{db}: no history yet (`harness run` and `harness nightly` write it; "
                         "--db picks another file)")
    rows = query(db, recipe=args.recipe, entry=args.entry, hardware=args.hardware)
    if not rows:
        raise UsageError(f"{db}: no runs of {args.recipe!r}"
                         + (f" (entry {args.entry})" if args.entry else "")
                         + (f" on {args.hardware}" if args.hardware else ""))
    gate = gate_for(rows[-1].suite, args)
    shown = rows[-args.last:] if args.last else rows
    lines = format_trend(rows, gate).splitlines()
    print("\n".join([lines[0], *lines[1:][-len(shown):]]))
    print(f"{len(shown)} of {len(rows)} runs shown; gate: median +/- {gate.k:g} x max(1.4826 MAD, "
          f"{gate.rel_floor:g} x median) over the last {gate.window} passing runs (min {gate.min_runs})")
    for line in format_bands(rows, gate):
        print(line)
    return 0
