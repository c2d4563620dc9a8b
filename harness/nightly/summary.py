"""The one report of a nightly run: summary.md (people) and summary.json (machines).

It lists every selected entry, including those that never reported (a crashed worker shows as
"not run", not as a silent gap), links each to its run dir and report, says which failures were
retried for which infrastructure signature, shows the performance gate, and draws wall time and
the reward curves of all entries.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from harness.history.extract import metrics_path
from harness.metrics import MetricsError, read_metrics
from harness.nightly.charts import overlay_chart, wall_time_chart
from harness.nightly.signatures import SIGNATURES
from harness.report.atomic import write_json_atomic, write_text_atomic
from harness.report.markdown import format_seconds, table
from harness.suites import Entry, Suite

CURVE = "train/reward"
WHY = {s.name: s.why for s in SIGNATURES}


def collect_rows(out: Path, suites: Sequence[tuple[Suite, Sequence[Entry]]]) -> list[dict]:
    """One row per selected entry: its outcome file if it ran, else disabled or not run."""
    rows = []
    for suite, entries in suites:
        for entry in entries:
            row = {"suite": suite.name, "entry": entry.id, "hardware": entry.hardware, "outcome": None,
                   "disabled": None}
            path = out / "outcomes" / f"{entry.id}.json"
            if entry.disabled is not None:
                off = entry.disabled
                row.update(result="disabled", disabled={"until": str(off.until), "owner": off.owner,
                                                        "reason": off.reason})
            elif path.is_file():
                outcome = json.loads(path.read_text(encoding="utf-8"))
                row["outcome"] = outcome
                row["result"] = "passed" if outcome["ok"] else ("error" if outcome["verdict"] == "error" else "failed")
            else:
                row["result"] = "not run"
            rows.append(row)
    return rows


def _link(out: Path, target: str | os.PathLike, text: str) -> str:
    rel = os.path.relpath(Path(target), out) if Path(target).is_absolute() else str(target)
    return f"[{text}]({Path(rel).as_posix()})"


def _gate_cell(outcome: dict) -> str:
    statuses = [f"{g['metric'].split('_')[0]}: {g['status']}" for g in outcome["gate"]]
    return ", ".join(statuses) or "-"


def entry_rows(out: Path, rows: Sequence[dict]) -> list[list]:
    body = []
    for row in rows:
        o = row["outcome"]
        if o is None:
            body.append([row["entry"], row["result"], "-", row["hardware"], "-", "-", "-", "-", "-", "-", "-"])
            continue
        final = o["run"]["attempts"][-1]
        report = Path(final["run_dir"]) / "report.md"
        r = o["row"]
        wall = sum(a["wall_s"] for a in o["run"]["attempts"])
        body.append([row["entry"], row["result"], o["recipe"], row["hardware"], len(o["run"]["attempts"]),
                     format_seconds(wall), r["final_reward"], r["step_time_s"], r["tokens_per_s"], _gate_cell(o),
                     _link(out, final["run_dir"], Path(final["run_dir"]).name)
                     + (" · " + _link(out, report, "report") if report.exists() else "")])
    return body


def retry_lines(out: Path, rows: Sequence[dict]) -> list[str]:
    lines = []
    for row in rows:
        o = row["outcome"]
        for a in (o or {}).get("run", {}).get("attempts", []):
            if a["infra"]:
                action = "retried" if a["retried"] else "not retried: no retries left"
                lines.append(f"- `{row['entry']}` attempt {a['number']} ({_link(out, a['run_dir'], 'run dir')}) "
                             f"failed with infrastructure signature `{a['infra']}` ({WHY.get(a['infra'], '')}); "
                             f"{action}. Matched line: `{a['infra_line']}`")
    return lines


def failure_lines(out: Path, rows: Sequence[dict]) -> list[str]:
    lines = []
    for row in rows:
        o = row["outcome"]
        if row["result"] == "not run":
            lines.append(f"- `{row['entry']}`: no outcome was written (the worker running it died or was stopped)")
        if o is None or o["ok"]:
            continue
        final = o["run"]["attempts"][-1]
        run_dir = Path(final["run_dir"])
        why = ", ".join(f"`{c}`" for c in o["failed_checks"]) or f"no check verdicts: `{harness_error(run_dir)}`"
        if o["run"].get("expected") is not None:
            why = "the verdict is not the expected one: " + "; ".join(o["run"]["problems"])
        regressed = [g["message"] for g in o["gate"] if g["status"] == "regression"]
        links = [_link(out, run_dir / name, name) for name in ("report.md", "harness.log", "engine.log")
                 if (run_dir / name).exists()]
        lines.append(f"- `{row['entry']}`: harness exit {final['exit_code']}, state {final['state']}; "
                     f"failed: {why}{'; performance: ' + '; '.join(regressed) if regressed else ''} "
                     f"({', '.join(links)})")
    return lines


def harness_error(run_dir: Path) -> str:
    """The harness's last error line (`error: ...`), or a pointer to its log."""
    try:
        lines = (run_dir / "harness.log").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no harness.log"
    errors = [line.strip() for line in lines if line.startswith(("error:", "internal error:"))]
    return (errors[-1] if errors else "see harness.log")[:300]


def reliability(rows: Sequence[dict]) -> list[str]:
    """The fault matrix's table: per fault entry, expected and actual verdict, lost steps, leftovers."""
    faults = [r for r in rows if r["outcome"] is not None and r["outcome"]["run"].get("expected") is not None]
    if not faults:
        return []
    body, lost_total = [], 0
    for row in faults:
        run = row["outcome"]["run"]
        seen = run["observed"]
        lost_total += len(seen["steps_lost"])
        actual = (f"exit {seen['exit']}; state {seen['state']}; engine exit {seen['engine_exit']}"
                  + (f"; dead {seen['dead_worker']}" if seen["dead_worker"] else "")
                  + f"; failed {', '.join(seen['failed_checks'] or []) or 'none'}")
        body.append([row["entry"], run["fault"], run["expected"], actual,
                     "yes" if not run["problems"] else "NO: " + "; ".join(run["problems"]),
                     f"{len(seen['steps_lost'])} of {seen['steps_seen']}", len(seen["leftovers"])])
    right = sum(not r["outcome"]["run"]["problems"] for r in faults)
    lines = ["", "## Reliability", "",
             f"Faults tried: **{len(faults)}**; verdicts right: **{right} of {len(faults)}**; data lost: "
             f"**{'none' if not lost_total else f'{lost_total} step line(s)'}** (a metrics step seen during a run "
             "and missing after it); leftover processes: "
             f"**{sum(len(r['outcome']['run']['observed']['leftovers']) for r in faults)}**.", ""]
    return lines + table(["entry", "fault", "expected", "actual", "right", "steps lost", "leftovers"], body)


def gate_rows(rows: Sequence[dict]) -> list[list]:
    body = []
    for row in rows:
        for g in (row["outcome"] or {}).get("gate", []):
            band = g["band"]
            body.append([row["entry"], g["metric"], g["value"],
                         "-" if band is None else f"[{band['low']:.4g}, {band['high']:.4g}]",
                         "-" if band is None else band["count"], g["status"]])
    return body


def draw(out: Path, rows: Sequence[dict]) -> list[str]:
    """The charts that have data; returns markdown image lines."""
    images = []
    ran = [r for r in rows if r["outcome"] is not None]
    bars = [(r["entry"], sum(a["wall_s"] for a in r["outcome"]["run"]["attempts"]), r["result"]) for r in ran]
    if bars:
        wall_time_chart(out / "plots" / "wall_time.png", bars)
        images.append("![wall time per entry](plots/wall_time.png)")
    curves = {}
    for r in ran:
        try:
            path = metrics_path(Path(r["outcome"]["run"]["attempts"][-1]["run_dir"]))
            if path is None:
                continue
            metrics = read_metrics(path)
        except (MetricsError, OSError):
            continue
        if metrics.get(CURVE):
            curves[r["entry"]] = metrics[CURVE]
    if curves:
        overlay_chart(out / "plots" / "train_reward.png", metric=CURVE, curves=curves)
        images.append(f"![{CURVE} per entry](plots/train_reward.png)")
    return images


def write_summary(out: Path, rows: Sequence[dict], *, wall_s: float) -> Path:
    """Write out/summary.md, out/summary.json and out/plots/; returns the markdown path."""
    counts = {k: sum(r["result"] == k for r in rows) for k in ("passed", "failed", "error", "disabled", "not run")}
    ok = counts["passed"] > 0 and counts["passed"] + counts["disabled"] == len(rows)
    names = ", ".join(sorted({r["suite"] for r in rows}))
    commits = sorted({r["outcome"]["row"]["commit_sha"] or "?" for r in rows if r["outcome"]})
    md = [f"# Nightly `{names}`: {'PASS' if ok else 'FAIL'}", ""]
    md += table(["", ""], [["entries", ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "none"],
                           ["wall time", format_seconds(wall_s)], ["commit", ", ".join(commits) or "-"]])
    md += ["", "## Entries", ""]
    md += table(["entry", "result", "recipe", "hardware", "attempts", "wall", "final reward", "step time (s)",
                 "tokens/s/GPU", "gate", "run dir"], entry_rows(out, rows))
    md += reliability(rows)
    retries = retry_lines(out, rows)
    md += ["", "## Retries", ""] + (retries or ["None: no failure matched a known infrastructure signature."])
    md += ["", "Only failures of unfinished runs whose engine.log matches a signature in "
               "harness/nightly/signatures.py are retried; every other failure stands."]
    failures = failure_lines(out, rows)
    if failures:
        md += ["", "## Failures", ""] + failures
    gates = gate_rows(rows)
    if gates:
        md += ["", "## Performance gate", ""]
        md += table(["entry", "metric", "value", "noise band", "runs", "status"], gates)
    disabled = [[r["entry"], r["disabled"]["until"], r["disabled"]["owner"], r["disabled"]["reason"]]
                for r in rows if r["disabled"]]
    if disabled:
        md += ["", "## Disabled", ""] + table(["entry", "until", "owner", "reason"], disabled)
    images = draw(out, rows)
    if images:
        md += ["", "## Plots", ""] + [line + "\n" for line in images]
    write_json_atomic(out / "summary.json", {"ok": ok, "counts": counts, "wall_s": wall_s, "entries": rows})
    return write_text_atomic(out / "summary.md", "\n".join(md).rstrip() + "\n")

