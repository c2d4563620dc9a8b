"""The import report as markdown (the JSON form is the report dict itself)."""

from __future__ import annotations

from typing import Any

__all__ = ["markdown"]

UNKNOWN_SHOWN = 40


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any]) -> str:
    ref, c = report["reference"], report["counts"]
    out = [
        "# Import report",
        "",
        f"Reference: `{ref['path']}` at commit `{ref['commit'] or 'unknown'}`, imported {ref['imported']}; "
        f"Hub checkpoints planned from the Hugging Face cache `{ref['hf_hub_cache']}`.",
        "",
        "| count | |",
        "|---|---|",
    ]
    for key, value in c.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "0"
        out.append(f"| {key.replace('_', ' ')} | {value} |")
    out += ["", "## Recipes not written", ""]
    if report["recipes_not_written"]:
        out += ["| script | category | reason |", "|---|---|---|"]
        out += [f"| {_cell(x['script'])} | {x['category']} | {_cell(x['reason'])} |"
                for x in report["recipes_not_written"]]
    else:
        out.append("none")
    out += ["", "## Checks not translated", ""]
    if report["checks_not_translated"]:
        out += ["| where | check | category | reason |", "|---|---|---|---|"]
        out += [f"| {_cell(x['script'])}:{x['line']} | `{_cell(x['check'])}` | {x['category']} | {_cell(x['reason'])} |"
                for x in report["checks_not_translated"]]
    else:
        out.append("none")
    out += ["", "## Checks our self-test logic flags", ""]
    if report["checks_flagged"]:
        out += ["| where | check | kind | why |", "|---|---|---|---|"]
        out += [f"| {_cell(x['script'])}:{x['line']} | `{_cell(x['check'])}` | {x['kind']} | {_cell(x['reason'])} |"
                for x in report["checks_flagged"]]
    else:
        out.append("none")
    out += ["", "## Reference values our schema cannot hold", ""]
    if report["values_refused"]:
        out += ["| script | key | value | reason |", "|---|---|---|---|"]
        out += [f"| {_cell(x['script'])} | {x['key']} | `{_cell(x['value'])}` | {_cell(x['reason'])} |"
                for x in report["values_refused"]]
    else:
        out.append("none")
    unsupported = report["unsupported_keys"]
    out += ["", f"## Reference keys ours does not support ({len(unsupported)}; recipes holding each, and why)", ""]
    if unsupported:
        out += ["| key | recipes | why |", "|---|---|---|"]
        out += [f"| {_cell(k)} | {x['recipes']} | {_cell(x['reason'])} |" for k, x in unsupported.items()]
    else:
        out.append("none")
    unknown = report["unknown_keys"]
    out += ["", f"## Unknown reference keys ({len(unknown)}; recipes holding each)", ""]
    if unknown:
        out += ["| key | recipes |", "|---|---|"]
        out += [f"| {_cell(k)} | {n} |" for k, n in list(unknown.items())[:UNKNOWN_SHOWN]]
        if len(unknown) > UNKNOWN_SHOWN:
            out.append(f"\n{len(unknown) - UNKNOWN_SHOWN} more in import-report.json")
    else:
        out.append("none")
    out += ["", "## Suites", "", "| list | entries | imported | disabled | written |", "|---|---|---|---|---|"]
    out += [f"| {s['list']} | {s['entries']} | {s['imported']} | {s['disabled']} | "
            f"{'yes' if s.get('written') else 'no: ' + _cell(s.get('why', ''))} |" for s in report["suites"]]
    return "\n".join(out) + "\n"
