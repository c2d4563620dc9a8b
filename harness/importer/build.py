"""`harness import reference PATH`: the reference's test suites as our recipes, thresholds and suites.

`import_reference(root)` reads, never runs, the checkout at `root` and returns an `Import`: the
files to write (relative path -> text) and the report of everything that did not map. Every
recipe and suite in `files` has been resolved, validated, planned and (its thresholds) loaded by
our own code in a staging folder before it is returned; a candidate recipe that fails is not
written, and the report says why. Layout of the output (docs/import.md):

    recipes/<name>.yaml            one per script whose recipe maps (an external engine: the driver)
    recipes/_base/<root>.yaml      leaves shared by every script on one reference base recipe
    recipes/suites/<list>.yaml     nightly/release/performance/... lists, disabled entries marked
    thresholds/<name>.yaml         each script's checks in our language
    import-report.md, import-report.json
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bounded import BoundedReadError, read_text
from harness.errors import USER_ERRORS
from harness.importer import mapping
from harness.importer.checks import Untranslatable, flags_of, translate
from harness.importer.reference_yaml import ReferenceError_, load_reference_recipe, parse_value, set_dotted
from harness.importer.shell import Script, read_script
from harness.thresholds import metric_names, parse

__all__ = ["Import", "import_reference"]

SUITES_DIR = Path("tests/test_suites")
RECIPES_DIR = Path("examples/configs/recipes")
DISABLED_LIST = "disabled"
UNTIL_DAYS = 14
# Our leaves that are per script, never put in a shared base.
_OWN = ("name", "description", "engine.", "checks.thresholds")


@dataclass
class CheckResult:
    line: int
    text: str
    expr: str | None = None
    category: str | None = None
    reason: str | None = None
    flags: list[dict] = field(default_factory=list)


@dataclass
class ScriptResult:
    script: str
    name: str
    reference_recipe: str | None = None
    chain_root: str | None = None
    recipe: dict[str, Any] = field(default_factory=dict)  # our flat leaves
    problem: tuple[str, str] | None = None  # (category, reason) when no recipe is written
    checks: list[CheckResult] = field(default_factory=list)
    guards_dropped: int = 0
    unknown: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    mapped: dict[str, str] = field(default_factory=dict)
    parsed: Script | None = None

    @property
    def translated(self) -> list[CheckResult]:
        return [c for c in self.checks if c.expr is not None]


@dataclass
class Import:
    files: dict[str, str]
    report: dict[str, Any]
    markdown: str


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _read(path: Path) -> str:
    try:
        return read_text(path, kind="recipe")
    except BoundedReadError as error:
        raise ReferenceError_(str(error)) from None


def _name(stem: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", stem.lower()).strip("_") or "recipe"


def _commit(root: Path) -> str | None:
    """The commit of the checkout at `root`, when `root` is the top of a git work tree."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split("\n")
    if out.returncode or len(lines) < 2 or Path(lines[0]).resolve() != root.resolve():
        return None  # not a checkout of its own (a folder inside another repository)
    return lines[1] if re.fullmatch(r"[0-9a-f]{40}", lines[1]) else None


# ---------------------------------------------------------------- suite lists


@dataclass
class ListEntry:
    script: str
    line: int
    comment: str


def read_list(text: str) -> list[ListEntry]:
    """Entries of a suite list, each with the comment block right above it (a disabled reason)."""
    entries, block = [], []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            block = []
        elif line.startswith("#"):
            block.append(line.lstrip("#").strip())
        else:
            entries.append(ListEntry(line, number, " ".join(b for b in block if b)))
            block = []
    return entries


# ---------------------------------------------------------------- one script


def _checks(result: ScriptResult, script_text: str) -> None:
    parsed = result.parsed = read_script(script_text)
    for call in parsed.checks:
        if call.guard_line is not None:
            result.guards_dropped += 1
        for word in call.words:
            check = CheckResult(line=word.line, text=word.text.strip())
            if word.unresolved:
                check.category, check.reason = "shell_variable", (
                    f"uses ${', $'.join(word.unresolved)}, which the script does not set to a number")
            else:
                try:
                    check.expr = translate(check.text)
                except Untranslatable as error:
                    check.category, check.reason = error.category, str(error)
            if check.expr is not None:
                check.flags = [{"kind": f.kind, "reason": f.reason} for f in flags_of(check.expr)]
            result.checks.append(check)


def _map_recipe(result: ScriptResult, root: Path, script: Path, sub: Path, hardware: str | None) -> None:
    parsed = result.parsed
    if parsed is None:  # the caller maps only scripts that parsed
        raise ValueError(f"{script}: no parsed script to map")
    if parsed.driver is None:
        result.problem = (("wrapper", "runs another suite script (bash $SCRIPT_DIR/$BASE_RECIPE.sh); not followed")
                          if parsed.delegates else
                          ("no_training_command", "no training command (examples/.../run_<x>.py) found"))
        return
    algorithm = mapping.ALGORITHMS.get(parsed.driver)
    ref_yaml = root / RECIPES_DIR / sub / f"{script.stem}.yaml"
    if not ref_yaml.is_file():
        result.problem = ("no_reference_recipe", f"{_rel(ref_yaml, root)} not found")
        return
    result.reference_recipe = _rel(ref_yaml, root)
    overrides: dict[str, Any] = {}
    unknowable: list[tuple[str, str, int]] = []
    for word in parsed.overrides:  # the script's command line wins over the recipe
        key, _, value = word.text.partition("=")
        if mapping.superseded_reason(key):
            result.superseded.append(key)
        elif word.unresolved:  # a value we cannot know: refused where it maps, unknown where it does not
            unknowable.append((key, value, word.line))
        else:
            overrides[key] = parse_value(value)
    flat, chain = load_reference_recipe(ref_yaml, overrides)
    result.chain_root = _rel(chain[0], root)
    for key, value, line in unknowable:
        for old in [k for k in flat if k == key or k.startswith(key + ".")]:
            del flat[old]
        if mapping.lookup(key, {**flat, key: value}) is not None:
            result.refused.append({"key": key, "value": value, "reason": "set from a shell variable the "
                                   f"script does not set to a number (line {line})"})
        else:
            result.unknown.append(key)
    ours: dict[str, Any] = {}
    conditional = []
    for key, value in flat.items():
        entry = mapping.lookup(key, flat)
        if entry is not None and entry.when:
            conditional.append((key, value, entry))
        elif entry is not None:
            _convert(result, ours, key, value, entry, flat)
        elif key == mapping.TORCH_SCHEDULER and flat.get(mapping.MEGATRON) is not True:  # megatron's: its own keys
            _convert_schedule(result, ours, key, value, flat)
        elif key == "policy.tokenizer.name":  # model.tokenizer: null reads the checkpoint's own
            if value == flat.get("policy.model_name"):
                result.superseded.append(key)
            else:
                result.refused.append({"key": key, "value": str(value), "reason": "a tokenizer other than the "
                                       "model's; model.tokenizer takes a shipped name or a local path"})
        elif mapping.superseded_reason(key):
            result.superseded.append(key)
        elif mapping.unsupported_reason(key):
            result.unsupported.append(key)
        else:
            result.unknown.append(key)
    for key, value, entry in conditional:  # a backend's own settings win over the generic ones
        _convert(result, ours, key, value, entry, flat)

    if result.refused:
        result.problem = ("value_refused", "; ".join(f"{x['key']}: {x['reason']}" for x in result.refused))
        return
    model = ours.get("model.path")
    if not isinstance(model, str) or not model:
        result.problem = ("model", "policy.model_name is not set")
        return
    if model.startswith(("/", "./", "../")):
        ours["model.path"] = str((root / model).resolve())
    family = mapping.family_of(model)
    if family is None:
        result.problem = ("model_family", f"{model}: not a family our schema holds (qwen3_5, qwen3_5_moe)")
        return
    if algorithm is None:
        result.problem = ("algorithm", f"{parsed.driver}.py: no counterpart in algorithm.name (grpo, distill)")
        return
    used = [v for k, v in flat.items() if k.startswith("data.") and k.endswith(".env_name") and isinstance(v, str)]
    envs = sorted(set(used) or {k.split(".")[1] for k in flat if k.startswith("env.")})
    if len(envs) != 1 or envs[0] not in mapping.TASKS:
        result.problem = ("task", f"env {', '.join(envs) or '(none)'}: no single counterpart in task.name "
                          f"({', '.join(sorted(mapping.TASKS.values()))})")
        return
    tasks = [mapping.TASKS[envs[0]]]
    if hardware is None:
        result.problem = ("hardware", "only on GB200 lists; GB200 is not one of our hardware classes")
        return
    ours.update({"model.family": family, "model.tokenizer": None, "algorithm.name": algorithm,
                 "task.name": tasks[0], "cluster.device": hardware})
    if sub.parts and sub.parts[0] == "vlm":
        ours["model.modality"] = "vision"
    variables = parsed.variables
    if "NUM_NODES" in variables:  # the allocation the script asks for
        if ours.get("cluster.nodes", variables["NUM_NODES"]) != variables["NUM_NODES"]:
            result.problem = ("value_refused", f"cluster.num_nodes = {ours['cluster.nodes']} but the script "
                              f"allocates NUM_NODES = {variables['NUM_NODES']}")
            return
        ours["cluster.nodes"] = variables["NUM_NODES"]
    if "NUM_MINUTES" in variables:
        ours["limits.timeout_s"] = variables["NUM_MINUTES"] * 60 * max(1, variables.get("NUM_RUNS", 1))
    metrics = root / SUITES_DIR / sub / script.stem / "metrics.json"
    ours.update({
        "name": result.name,
        "description": f"imported from {result.script}",
        "engine.command": ["bash", str(script.resolve())],
        "engine.metrics": "reference_json",
        "engine.metrics_path": str(metrics.resolve()),
        "checks.invariants": False,
    })
    result.recipe = ours


def _convert(result: ScriptResult, ours: dict, key: str, value: Any, entry: mapping.Key,
             flat: dict[str, Any]) -> None:
    try:
        converted = entry.convert(value)
        if entry.check is not None:
            entry.check(converted, flat)
        ours[entry.ours] = converted
        result.mapped[key] = entry.ours
    except mapping.Refused as error:
        _refuse(result, key, value, error)


def _convert_schedule(result: ScriptResult, ours: dict, key: str, value: Any, flat: dict[str, Any]) -> None:
    """The DTensor path's scheduler list: several of our keys from one leaf (`mapping.torch_schedule`)."""
    try:
        schedule = mapping.torch_schedule(value, flat)
    except mapping.Refused as error:
        _refuse(result, key, value, error)
        return
    ours.update(schedule)
    result.mapped[key] = ", ".join(schedule)


def _refuse(result: ScriptResult, key: str, value: Any, error: mapping.Refused) -> None:
    result.refused.append({"key": key, "value": value if isinstance(value, (int, float, str, bool)) or
                           value is None else str(value), "reason": str(error)})


# ---------------------------------------------------------------- files


def _nested(flat: dict[str, Any]) -> dict:
    out: dict = {}
    for key, value in flat.items():
        set_dotted(out, key, value)
    return out


def _dump(flat: dict[str, Any], head: str) -> str:
    from harness.recipe.show import dump_recipe  # noqa: PLC0415 - the schema loads only when writing

    data = _nested(flat)
    defaults = data.pop("defaults", None)
    body = dump_recipe(data)
    lead = f"defaults: {json.dumps(defaults)}\n" if defaults else ""
    return head + lead + body


def _thresholds_text(result: ScriptResult, today: dt.date) -> str:
    lines = [f"# Imported from {result.script} by `harness import reference`;",
             "# each check's `why` names the line it came from."]
    if result.guards_dropped:
        lines.append("# The script's early-stop jq guard is dropped: our checks fail closed on a short run.")
    lines += [f"recipe: {result.name}", "checks:"]
    seen: Counter = Counter()
    for check in result.translated:
        metric = metric_names(parse(check.expr))[0]
        base = re.sub(r"[^A-Za-z0-9_]+", "_", metric).strip("_") or "check"
        seen[base] += 1
        name = base if seen[base] == 1 else f"{base}_{seen[base]}"
        lines += [f"  - name: {name}",
                  f"    expr: {json.dumps(check.expr)}",
                  f"    why: {json.dumps(f'imported from {result.script}:{check.line}: {check.text}')}",
                  f"    since: {today.isoformat()}"]
        for flag in check.flags:
            lines.append(f"    # import: {flag['kind']}: {flag['reason']}")
    return "\n".join(lines) + "\n"


def _bases(results: list[ScriptResult]) -> dict[str, tuple[str, dict[str, Any]]]:
    """script -> (base file name, shared leaves) for scripts whose reference recipes share a root."""
    groups: dict[str, list[ScriptResult]] = {}
    for r in results:
        groups.setdefault(r.chain_root or "", []).append(r)
    out = {}
    for root_file, members in groups.items():
        if len(members) < 2 or not root_file:
            continue
        first = members[0].recipe
        shared = {k: v for k, v in first.items() if not k.startswith(_OWN)
                  and all(k in m.recipe and m.recipe[k] == v for m in members[1:])}
        if not shared:
            continue
        base = _name(Path(root_file).stem)
        for m in members:
            out[m.script] = (base, shared)
    return out


def _validate_recipe(path: Path) -> str | None:
    from harness.plan import make_plan  # noqa: PLC0415 - the planner loads only when validating
    from harness.recipe import load_recipe  # noqa: PLC0415
    from harness.thresholds import load_thresholds  # noqa: PLC0415

    try:
        resolved = load_recipe(path)
        make_plan(resolved.data)
        thresholds = resolved.data["checks"].get("thresholds")
        if thresholds:
            load_thresholds(Path(thresholds), hardware=resolved.data["checks"].get("hardware"))
    except USER_ERRORS as error:
        return str(error).replace(str(path.parent) + "/", "")
    return None


def _stage(files: dict[str, str], folder: Path) -> None:
    for rel, text in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _suite_text(stem: str, entries: list[tuple[ListEntry, ScriptResult | None, str | None]],
                disabled: dict[str, ListEntry], hardware: str, today: dt.date,
                budget: float) -> str:
    until = (today + dt.timedelta(days=UNTIL_DAYS)).isoformat()
    lines = [f"# Imported from tests/test_suites/{stem}.txt by `harness import reference`.",
             "# budget_gpu_hours: the sum of the enabled entries' nodes x GPUs x time limit.",
             f"name: {stem}",
             f"description: {json.dumps(f'imported from tests/test_suites/{stem}.txt')}",
             f"hardware: {hardware}",
             f"budget_gpu_hours: {budget:g}",
             "entries:"]
    seen: set[str] = set()
    for entry, result, why in entries:
        if result is None or not result.recipe or why:
            lines.append(f"  # not imported: {entry.script} (line {entry.line}): {why}")
            continue
        eid = Path(entry.script).stem.lower()
        if eid in seen:
            lines.append(f"  # not imported: {entry.script} (line {entry.line}): listed twice")
            continue
        seen.add(eid)
        lines += [f"  - id: {json.dumps(eid)}", f"    recipe: ../{result.name}.yaml"]
        off = disabled.get(entry.script)
        if off is not None:
            reason = f"disabled in the reference (disabled.txt:{off.line}): " + (
                off.comment or "(disabled.txt gives no reason)")
            lines += ["    disabled:",
                      f"      reason: {json.dumps(reason)}",
                      "      owner: unassigned  # FILL: who re-enables it (placeholder written by harness import)",
                      f"      until: \"{until}\"  # FILL: a placeholder, {UNTIL_DAYS} days after the import; "
                      "set the real date"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the whole import


def import_reference(root: Path, *, today: dt.date | None = None) -> Import:
    root = Path(root)
    today = today or dt.date.today()
    suites_dir = root / SUITES_DIR
    if not suites_dir.is_dir():
        raise ReferenceError_(f"{root}: no {SUITES_DIR} folder (is this a checkout of the reference?)")
    lists = {p.stem: read_list(_read(p)) for p in sorted(suites_dir.glob("*.txt"))}
    hardware_of: dict[str, set[str | None]] = {}
    for stem, entries in lists.items():
        for e in entries:
            hardware_of.setdefault(e.script, set()).add(mapping.hardware_of_list(stem))
    scripts = sorted(p for p in suites_dir.rglob("*.sh") if p.is_file())
    results: list[ScriptResult] = []
    for script in scripts:
        rel = _rel(script, root)
        result = ScriptResult(script=rel, name=_name(script.stem))
        _checks(result, _read(script))
        kinds = hardware_of.get(rel, {"h100"}) - {None}
        _map_recipe(result, root, script, script.parent.relative_to(suites_dir), next(iter(kinds), None))
        results.append(result)
    _unique_names(results)

    files: dict[str, str] = {}
    for r in results:
        if r.translated:
            files[f"thresholds/{r.name}.yaml"] = _thresholds_text(r, today)
            if r.recipe:
                r.recipe["checks.thresholds"] = f"../thresholds/{r.name}.yaml"
    with tempfile.TemporaryDirectory(prefix="harness-import-") as tmp:
        stage = Path(tmp)
        _stage(files, stage)
        for r in results:  # each candidate alone, flat, as our validator sees it
            if not r.recipe:
                continue
            path = stage / "recipes" / f"{r.name}.yaml"
            _stage({f"recipes/{r.name}.yaml": _dump(r.recipe, "")}, stage)
            problem = _validate_recipe(path)
            if problem:
                r.problem, r.recipe = (_invalid_category(problem), problem), {}
            path.unlink()
    written = [r for r in results if r.recipe]
    bases = _bases(written)
    for base_name, shared in {b: s for b, s in bases.values()}.items():
        root_file = next(r.chain_root for r in written if bases.get(r.script, ("",))[0] == base_name)
        files[f"recipes/_base/{base_name}.yaml"] = _dump(
            shared, f"# Shared by every imported script whose reference recipe derives from {root_file}.\n"
                    "# Not a recipe on its own (the leading _ keeps `harness validate` off it).\n")
    for r in written:
        head = (f"# Imported from {r.script} (reference recipe {r.reference_recipe}) by `harness import reference`.\n"
                "# The reference's own driver runs it (engine.command); our harness checks and reports.\n")
        if r.script in bases:
            base_name, shared = bases[r.script]
            own = {k: v for k, v in r.recipe.items() if k not in shared}
            files[f"recipes/{r.name}.yaml"] = _dump({"defaults": f"_base/{base_name}.yaml", **own}, head)
        else:
            files[f"recipes/{r.name}.yaml"] = _dump(r.recipe, head)

    by_script = {r.script: r for r in results}
    disabled = {e.script: e for e in lists.get(DISABLED_LIST, [])}
    suites: list[dict] = []
    for stem, entries in lists.items():
        hardware = mapping.hardware_of_list(stem)
        rows = []
        for e in entries:
            r = by_script.get(e.script)
            why = ("no such script" if r is None else None if r.recipe
                   else f"no recipe ({r.problem[0]}: {r.problem[1]})" if r.problem else "no recipe")
            rows.append((e, r, why))
        importable = [row for row in rows if row[2] is None]
        info = {"list": f"{stem}.txt", "entries": len(entries), "imported": len(importable),
                "disabled": sum(1 for e, r, w in importable if e.script in disabled or stem == DISABLED_LIST)}
        if hardware is None:
            info["written"], info["why"] = False, "a GB200 list; GB200 is not one of our hardware classes"
        elif not importable:
            info["written"], info["why"] = False, "no entry has a recipe"
        else:
            off = disabled if stem != DISABLED_LIST else {e.script: e for e in entries}
            budget = math.ceil(sum(_gpu_hours(r.recipe) for e, r, _ in importable if e.script not in off))
            files[f"recipes/suites/{stem}.yaml"] = _suite_text(stem, rows, off, hardware, today, budget)
            info["written"] = True
        suites.append(info)

    with tempfile.TemporaryDirectory(prefix="harness-import-") as tmp:  # what we write must validate
        stage = Path(tmp)
        _stage(files, stage)
        _final_check(stage, [r.name for r in written], [s["list"][:-4] for s in suites if s.get("written")])

    report = _report(root, results, suites, today)
    from harness.importer.report import markdown  # noqa: PLC0415

    md = markdown(report)
    files["import-report.json"] = json.dumps(report, indent=1, sort_keys=False) + "\n"
    files["import-report.md"] = md
    return Import(files=files, report=report, markdown=md)


def _gpu_hours(recipe: dict[str, Any]) -> float:
    world = int(recipe.get("cluster.nodes", 1)) * int(recipe["cluster.devices_per_node"])
    return world * float(recipe.get("limits.timeout_s", 3600)) / 3600.0


def _invalid_category(problem: str) -> str:
    return "plan" if "needed to plan" in problem or "divide" in problem or "GiB" in problem else "invalid"


def _unique_names(results: list[ScriptResult]) -> None:
    seen: Counter = Counter()
    for r in results:
        seen[r.name] += 1
        if seen[r.name] > 1:
            r.name = f"{r.name}_{seen[r.name]}"


def _final_check(stage: Path, recipes: list[str], suites: list[str]) -> None:
    from harness.suites import suite_problems  # noqa: PLC0415

    problems = [f"recipes/{n}.yaml: {p}" for n in recipes
                if (p := _validate_recipe(stage / "recipes" / f"{n}.yaml"))]
    for stem in suites:
        _, found = suite_problems(stage / "recipes" / "suites" / f"{stem}.yaml")
        problems += [f"recipes/suites/{stem}.yaml: {p}" for p in found]
    if problems:
        raise RuntimeError("the import wrote files our validator refuses: " + "; ".join(problems))


def _report(root: Path, results: list[ScriptResult], suites: list[dict], today: dt.date) -> dict[str, Any]:
    from harness.plan.checkpoint_config import hub_cache  # noqa: PLC0415 - the cache the plans above read

    checks = [(r, c) for r in results for c in r.checks]
    untranslatable = [{"script": r.script, "line": c.line, "check": c.text, "category": c.category,
                       "reason": c.reason} for r, c in checks if c.expr is None]
    flags = [{"script": r.script, "line": c.line, "check": c.text, "expr": c.expr, **f}
             for r, c in checks for f in c.flags]
    not_written = [{"script": r.script, "category": r.problem[0], "reason": r.problem[1]}
                   for r in results if r.problem]
    unknown = Counter(k for r in results if r.reference_recipe for k in r.unknown)
    unsupported = Counter(k for r in results for k in r.unsupported)
    refused = [{"script": r.script, **x} for r in results for x in r.refused]
    counts = {
        "scripts_read": len(results),
        "scripts_with_checks": sum(1 for r in results if r.checks),
        "recipes_written": sum(1 for r in results if r.recipe),
        "recipes_not_written": dict(Counter(x["category"] for x in not_written)),
        "thresholds_files_written": sum(1 for r in results if r.translated),
        "checks_read": len(checks),
        "checks_translated": sum(1 for _, c in checks if c.expr is not None),
        "checks_not_translated": dict(Counter(x["category"] for x in untranslatable)),
        "checks_flagged": dict(Counter(x["kind"] for x in flags)),
        "guards_dropped": sum(r.guards_dropped for r in results),
        "scripts_with_guard": sum(1 for r in results if r.guards_dropped),
        "unsupported_reference_keys": len(unsupported),
        "unknown_reference_keys": len(unknown),
        "values_refused": len(refused),
        "suites_written": sum(1 for s in suites if s.get("written")),
    }
    return {
        "reference": {"path": str(root.resolve()), "commit": _commit(root), "imported": today.isoformat(),
                      "hf_hub_cache": str(hub_cache())},
        "counts": counts,
        "recipes_not_written": not_written,
        "checks_not_translated": untranslatable,
        "checks_flagged": flags,
        "unsupported_keys": {k: {"recipes": n, "reason": mapping.unsupported_reason(k)}
                             for k, n in sorted(unsupported.items(), key=lambda kv: (-kv[1], kv[0]))},
        "unknown_keys": dict(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))),
        "values_refused": refused,
        "suites": suites,
        "mapping": {k: v.ours for k, v in mapping.KEYS.items()},
    }
