"""Judge the run-time invariants the engine recorded in invariants.jsonl.

Fails closed: a violation fails, and so does the absence of a check the run must have made
(a dispatch path that recorded nothing is as suspicious as one that recorded a failure).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Mapping

from harness.checks.verdict import Verdict


class InvariantsError(Exception):
    """invariants.jsonl is unreadable."""


def read_invariants(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # a torn last line from a crash
                break
            raise InvariantsError(f"{path.name}:{number}: not JSON") from None
        if not isinstance(record, dict) or "check" not in record or "ok" not in record:
            raise InvariantsError(f"{path.name}:{number}: a record needs 'check' and 'ok'")
        records.append(record)
    return records


def required_checks(recipe: Mapping) -> list[str]:
    """The invariant kinds this recipe's run must have recorded at least once."""
    required = ["flops_fields"]
    if recipe.get("data_plane", {}).get("backend") == "tq":
        required.append("dispatch_row_order")
    if recipe.get("env"):
        required.append("env_propagated")
    return required


def check_invariants(records: list[dict], *, required: list[str]) -> list[Verdict]:
    """One verdict per invariant kind: required kinds, plus any kind the run recorded."""
    counts = Counter(r["check"] for r in records)
    failures: dict[str, list[dict]] = {}
    for record in records:
        if not record["ok"]:
            failures.setdefault(record["check"], []).append(record)
    verdicts = []
    for kind in sorted(set(required) | set(counts)):
        name = f"invariant:{kind}"
        if counts[kind] == 0:
            verdicts.append(Verdict(name=name, kind="invariant", ok=False,
                                    message=f"no {kind} check was recorded (a run must record it)"))
        elif kind in failures:
            first = failures[kind][0]
            where = f"step {first.get('step')}" + (f", {first['method']}" if first.get("method") else "")
            verdicts.append(Verdict(
                name=name, kind="invariant", ok=False, value=float(len(failures[kind])),
                message=f"{len(failures[kind])} of {counts[kind]} {kind} checks failed; first at {where}: "
                        f"{first.get('detail', 'no detail')}"))
        else:
            verdicts.append(Verdict(name=name, kind="invariant", ok=True, value=float(counts[kind]),
                                    message=f"{counts[kind]} of {counts[kind]} {kind} checks held"))
    if not records:
        verdicts.append(Verdict(name="invariant:any", kind="invariant", ok=False,
                                message="invariants.jsonl is missing or empty"))
    return verdicts
