"""report.md: what a person reads after a run: the verdict first, then why, then the pictures."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.checks.verdict import Verdict
from harness.report.atomic import write_text_atomic
from harness.report.phases import gpu_busy_line, phase_rows
from harness.report.plots import PlotSpec, draw_metric, plot_filename
from harness.report.result_json import overall_ok

MAX_METRIC_ROWS = 40
MAX_PLAN_ROWS = 60


def cell(value: Any) -> str:
    """A value as one Markdown table cell: numbers shortened, pipes and newlines escaped."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.6g}" if math.isfinite(value) else str(value)
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, default=str, separators=(", ", ": "))
    else:
        text = str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Markdown table lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def format_seconds(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
        return "unknown"
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    clock = f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
    return f"{seconds:.1f} s ({clock})"


def verdict_summary(verdicts: Sequence[Verdict]) -> str:
    if not verdicts:
        return "**FAIL** (no check produced a verdict)"
    failed = [v.name for v in verdicts if not v.ok]
    if not failed:
        return f"**PASS** ({len(verdicts)}/{len(verdicts)} checks passed)"
    return f"**FAIL** ({len(failed)} of {len(verdicts)} checks failed: {', '.join(failed)})"


def header_rows(recipe: Mapping[str, Any], status: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[list[Any]]:
    rows: list[list[Any]] = [["recipe", recipe.get("name", "?")]]
    if recipe.get("description"):
        rows.append(["description", recipe["description"]])
    cluster = recipe.get("cluster")
    if isinstance(cluster, Mapping):
        nodes, per_node, device = (cluster.get(k, "?") for k in ("nodes", "devices_per_node", "device"))
        rows.append(["cluster", f"{nodes} x {per_node} {device}"])
    rows += [
        ["state", status.get("state", "unknown")],
        ["verdict", verdict_summary(verdicts)],
        ["wall time", format_seconds(status.get("wall_s"))],
        ["steps", steps_cell(status)],
    ]
    if status.get("error"):
        rows.append(["error", status["error"]])
    return rows


def steps_cell(status: Mapping[str, Any]) -> str:
    """`20/20`; a parity run's top status.json has no steps of its own but each variant's
    (`variant_steps`, harness/commands/run.py): `legacy 20/20, tq 20/20`."""
    variants = status.get("variant_steps")
    if isinstance(variants, Mapping) and variants:
        return ", ".join(f"{name} {steps_cell(v)}" if isinstance(v, Mapping) else f"{name} not run"
                         for name, v in variants.items())
    return f"{status.get('last_step', '?')}/{status.get('num_steps', '?')}"


def variant_label(recipe: Mapping[str, Any], name: str) -> str:
    """A parity variant's legend entry, naming what it changes: `tq (data_plane.backend=tq)`."""
    overrides = (((recipe.get("checks") or {}).get("parity") or {}).get("variants") or {}).get(name)
    if not isinstance(overrides, Mapping) or not overrides:
        return name
    return f"{name} ({', '.join(f'{k}={v}' for k, v in overrides.items())})"


def flatten(data: Mapping[str, Any], prefix: str = "", depth: int = 2) -> list[tuple[str, Any]]:
    """Dotted keys down to `depth` levels; deeper values stay whole."""
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and depth > 1:
            items += flatten(value, f"{name}.", depth - 1)
        else:
            items.append((name, value))
    return items


def checked_metrics(verdicts: Sequence[Verdict], specs: Sequence[PlotSpec]) -> list[str]:
    """Metrics the checks looked at, in order of first mention."""
    names = [s.metric for s in specs] + [m for v in verdicts for m in v.metrics]
    return list(dict.fromkeys(names))


def metric_rows(metrics: Mapping[str, Mapping[int, float]], first: Sequence[str]) -> tuple[list[list[Any]], int]:
    """(metric, last step, final, min, max) rows, checked metrics first; and how many were left out."""
    order = [m for m in first if m in metrics] + sorted(m for m in metrics if m not in first)
    rows = []
    for name in order:
        series = metrics[name]
        if not series:
            continue
        last = max(series)
        finite = [float(v) for v in series.values() if isinstance(v, (int, float)) and math.isfinite(v)]
        rows.append([name, last, series[last], min(finite) if finite else None, max(finite) if finite else None])
    return rows[:MAX_METRIC_ROWS], max(len(rows) - MAX_METRIC_ROWS, 0)


def threshold_lines(specs: Sequence[PlotSpec], metric: str) -> list[tuple[float, str]]:
    """(value, label) of every bound on `metric`, each label naming its check and value."""
    return [(s.threshold, f"{s.label}: {s.threshold:g}")
            for s in specs if s.metric == metric and s.threshold is not None]


def plot_section(
    run_dir: Path, *, recipe_name: str, verdicts: Sequence[Verdict], specs: Sequence[PlotSpec],
    metrics: Mapping[str, Mapping[int, float]], variants: Mapping[str, Mapping[str, Mapping[int, float]]] | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[str]:  # fmt: skip
    """Draws plots/<metric>.png for every checked metric; returns the Markdown that embeds them.
    variants (a parity run's: name -> its metrics): one labelled curve each, named in the title."""
    lines: list[str] = []
    used: set[str] = set()
    if (run_dir / "plots").is_symlink():   # draw_metric would refuse each plot; say it once
        return [f"No plots: {run_dir / 'plots'} is a symlink, and nothing is written through one."]
    for metric in checked_metrics(verdicts, specs):
        series = metrics.get(metric) or {}
        curves = [((labels or {}).get(n, n), m.get(metric) or {}) for n, m in (variants or {}).items()]
        if not series and not any(points for _, points in curves):
            lines.append(f"- `{metric}`: no data recorded, nothing to plot")
            continue
        filename = plot_filename(metric)
        stem, n = filename[:-4], 2
        while filename in used:
            filename, n = f"{stem}_{n}.png", n + 1
        used.add(filename)
        lines_at = threshold_lines(specs, metric)
        try:
            title = f"{recipe_name}: {metric}" + (f" ({' vs '.join(variants)})" if curves else "")
            draw_metric(run_dir / "plots" / filename, name=metric, series=series, thresholds=lines_at,
                        title=title, curves=curves)  # fmt: skip
        except Exception as exc:  # a broken plot must not cost the report
            lines.append(f"- `{metric}`: plot failed ({type(exc).__name__}: {exc})")
            continue
        lines += [f"### {metric}", "", f"![{metric}](plots/{filename})", ""]
    return lines or ["No checked metric to plot."]


def write_report_md(
    run_dir: Path,
    *,
    recipe: dict,
    plan: dict | None,
    status: dict,
    verdicts: Sequence[Verdict],
    metrics: Mapping[str, Mapping[int, float]],
    thresholds: Sequence[PlotSpec] = (),
    self_test: Mapping[str, str] | None = None,
    variants: Mapping[str, Mapping[str, Mapping[int, float]]] | None = None,
) -> Path:
    """Writes run_dir/report.md and run_dir/plots/*.png; returns the report's path.

    self_test: check name -> its self-test result, shown as a column of the checks when given.
    variants: a parity run's variants, name -> metrics: each a labelled curve in every plot
    (`metrics` is then the first variant's, and the metrics table says so).
    """
    run_dir = Path(run_dir)
    name = str(recipe.get("name", "run"))
    word = "PASS" if overall_ok(verdicts) else "FAIL"
    out = [f"# {name}: {word}", ""]
    out += table(["", ""], header_rows(recipe, status, verdicts)) + [""]
    out += ["## Checks", ""]
    header = ["name", "kind", "ok", "value", "message", "why"] + (["self-test"] if self_test is not None else [])
    rows = [[v.name, v.kind, "PASS" if v.ok else "FAIL", v.value, v.message, v.why]
            + ([self_test.get(v.name)] if self_test is not None else []) for v in verdicts]
    out += (table(header, rows) if rows else ["No checks ran."]) + [""]
    out += ["## Plan", ""]
    plan_rows = flatten(plan) if plan else []
    out += (table(["key", "value"], plan_rows[:MAX_PLAN_ROWS]) if plan_rows else ["No plan recorded."]) + [""]
    if len(plan_rows) > MAX_PLAN_ROWS:
        out += [f"({len(plan_rows) - MAX_PLAN_ROWS} more entries in plan.json)", ""]
    out += ["## Final metrics", ""]
    if variants:
        out += [f"Of the first variant, {next(iter(variants))}; each variant's own report: "
                + ", ".join(f"[{n}]({n}/report.md)" for n in variants) + ".", ""]
    rows, left_out = metric_rows(metrics, checked_metrics(verdicts, thresholds))
    out += (table(["metric", "last step", "final", "min", "max"], rows) if rows else ["No metrics recorded."]) + [""]
    if left_out:
        out += [f"({left_out} more metrics in metrics.jsonl)", ""]
    phases = phase_rows(metrics)
    if phases:
        out += ["## Step phases", "", "Median seconds a step (step 1, with its compilation, left out when there "
                "are more).", ""]
        out += table(["phase", "median s", "share of step"], phases) + [""]
        busy = gpu_busy_line(metrics)
        if busy:
            out += [busy, ""]
    out += ["## Plots", ""]
    out += plot_section(run_dir, recipe_name=name, verdicts=verdicts, specs=thresholds, metrics=metrics,
                        variants=variants, labels={n: variant_label(recipe, n) for n in variants or {}})
    return write_text_atomic(run_dir / "report.md", "\n".join(out).rstrip() + "\n")
