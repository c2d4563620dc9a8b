"""Judge the run-time invariants the engine recorded in invariants.jsonl.

Fails closed: a violation fails, and so does the absence of a check the run must have made
(a dispatch path that recorded nothing is as suspicious as one that recorded a failure).
A record holds only when its `ok` is the JSON boolean true, and a line that cannot be read
(torn or not, a duplicate key, a symlink in the file's place) fails the run with its line number.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from harness.bounded import BoundedReadError, read_text
from harness.checks.verdict import Verdict
from harness.errors import UserError, capped_line, shown
from harness.recipe.secret_env import envs
from harness.strict_json import MAX_LINE_BYTES, DuplicateKeyError, loads, long_line


class InvariantsError(UserError):
    """invariants.jsonl is unreadable: the message names the line, and the run fails with it."""


def _record(path: Path, number: int, line: str) -> dict:
    try:
        record = loads(line)
    except DuplicateKeyError as exc:  # `{"ok": false, ..., "ok": true}` read as a check that held
        raise InvariantsError(f"{path.name}:{number}: duplicate key {shown(exc.key)} in a record") from None
    except ValueError:  # JSONDecodeError, too many keys, or an integer too long to convert
        raise InvariantsError(f"{path.name}:{number}: not a JSON record (a torn or damaged line)") from None
    except RecursionError:
        raise InvariantsError(f"{path.name}:{number}: nested too deeply") from None
    if not isinstance(record, dict) or "check" not in record or "ok" not in record:
        raise InvariantsError(f"{path.name}:{number}: a record needs 'check' and 'ok'")
    if not isinstance(record["check"], str) or not 0 < len(record["check"]) <= 100:
        raise InvariantsError(f"{path.name}:{number}: 'check' must be a name of 1 to 100 characters, "
                              f"got {shown(record['check'])}")
    return record


def read_invariants(path: Path) -> list[dict]:
    """The records of invariants.jsonl ([] when there is none).

    Every line must be a record, the last one too: a torn last line may be the failing record
    of a crash, so it is a failure, not something to skip.
    """
    if not path.exists() and not path.is_symlink():
        return []
    try:
        text = read_text(path, kind="invariants", follow_symlinks=False)
    except BoundedReadError as exc:
        raise InvariantsError(f"{path.name}: {exc.reason}") from None
    long = long_line(text)
    if long is not None:
        raise InvariantsError(f"{path.name}:{long}: a line of more than {MAX_LINE_BYTES} bytes is no record")
    lines = text.split("\n")
    return [_record(path, number, line) for number, line in enumerate(lines, start=1) if line.strip()]


def required_checks(recipe: Mapping) -> list[str]:
    """The invariant kinds this recipe's run must have recorded at least once."""
    required = ["flops_fields"]
    if recipe.get("data_plane", {}).get("backend") == "tq":
        required.append("dispatch_row_order")
    generation = recipe.get("generation", {})
    # rows decoded in groups, or spread over replicas asked for by number (a null count is the
    # engine's to derive: its records are judged when it writes them), order restored
    if generation.get("length_buckets", 1) > 1 or (generation.get("replicas") or 1) > 1:
        required.append("generation_row_order")
    if envs(recipe):  # env, policy.env or generation.env
        required.append("env_propagated")
    if recipe.get("algorithm", {}).get("name") == "distill":  # the reference's two loss bugs
        required += ["xtoken_valid_chunks", "xtoken_projection_shape"]
    return required


def check_invariants(records: list[dict], *, required: list[str]) -> list[Verdict]:
    """One verdict per invariant kind: required kinds, plus any kind the run recorded."""
    counts = Counter(r["check"] for r in records)
    failures: dict[str, list[dict]] = {}
    for record in records:
        if record["ok"] is not True:  # only JSON's true holds: "false", 0 and null do not
            failures.setdefault(record["check"], []).append(record)
    verdicts = []
    for kind in sorted(set(required) | set(counts)):
        name = f"invariant:{kind}"
        if counts[kind] == 0:
            verdicts.append(Verdict(name=name, kind="invariant", ok=False,
                                    message=f"no {kind} check was recorded (a run must record it)"))
        elif kind in failures:
            first = failures[kind][0]
            where = capped_line(f"step {first.get('step')}" + (f", {first['method']}" if first.get("method") else ""),
                                100)
            detail = capped_line(str(first.get("detail", "no detail")), 300) if first["ok"] is False else (
                f"ok is {shown(first['ok'])}, not the JSON boolean true")
            verdicts.append(Verdict(
                name=name, kind="invariant", ok=False, value=float(len(failures[kind])),
                message=f"{len(failures[kind])} of {counts[kind]} {kind} checks failed; first at {where}: {detail}"))
        else:
            verdicts.append(Verdict(name=name, kind="invariant", ok=True, value=float(counts[kind]),
                                    message=f"{counts[kind]} of {counts[kind]} {kind} checks held"))
    if not records:
        verdicts.append(Verdict(name="invariant:any", kind="invariant", ok=False,
                                message="invariants.jsonl is missing or empty"))
    return verdicts
