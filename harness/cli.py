"""The `harness` command.

    harness run [RECIPE] [a.b=c ...] [--scale tiny] [--out DIR] [--dry-run] [--resume] [--ray-address URL]
    harness sbatch RECIPE [a.b=c ...] [--scale tiny] [--partition P] [--out DIR] [--script FILE] [--submit]
    harness show RECIPE [a.b=c ...] [--scale tiny] [--provenance]
    harness plan RECIPE [a.b=c ...] [--scale tiny] [--out FILE]
    harness validate [PATHS ...] [--self-test]
    harness check RUN_DIR [--thresholds FILE] [--hardware CLASS] [--steps N] [--self-test] [--no-report]
    harness compare RUN_A RUN_B [--tolerance X] [--out DIR]
    harness calibrate RECIPE [a.b=c ...] [--scale tiny] [--seeds 42,7,123 | --runs DIR ...] [--hardware H]
                      [--out FILE] [--diff] [-n N]
    harness matrix SUITE [--hardware H] [--tag T] [--shard I/N] [--format text|json|github]
    harness nightly SUITE [-n N] [--out DIR] [--entry ID] [--shard I/N] [--history FILE]
    harness history RECIPE [--db FILE] [--entry ID] [--hardware H] [--last N]
    harness import reference PATH [--out DIR] [--write]
    harness --version

Exit codes: 0 every check passed; 1 a check failed; 2 bad input (recipe, thresholds, usage);
3 an internal error. Bad input is one line on stderr, never a traceback
(set HARNESS_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence

from harness.recipe.scales import SCALES

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
MAX_ERROR_LINES = 20  # the engine refuses a recipe with a line per reason; more than this is not a list to read


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line, like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_BAD_INPUT)


class _Version(argparse.Action):
    """`--version`, looked up only when asked: no command pays for importlib.metadata."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the harness's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from harness.version import harness_version  # noqa: PLC0415

        print(f"harness {harness_version()}")
        parser.exit()


def _recipe_args(p: argparse.ArgumentParser, *, optional: bool = False) -> None:
    p.add_argument("recipe", nargs="?" if optional else None, help="recipe YAML file")
    p.add_argument("overrides", nargs="*", help="overrides a.b=c (existing key) or ++a.b=c (new key)")
    p.add_argument("--scale", choices=list(SCALES),
                   help="run the recipe as one of its twins: tiny (CPU), h200x1 (1 x H200), h200x2 (2 x H200)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="resolve, validate, plan, launch, check and report a recipe")
    _recipe_args(run, optional=True)
    run.add_argument("--out", help="run dir (default: runs/<name>-<time>)")
    run.add_argument("--dry-run", action="store_true",
                     help="resolve, plan and print what would run; write nothing, launch nothing")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--history", default="runs/history.sqlite",
                     help="history database the run's row is appended to (default %(default)s)")
    run.add_argument("--no-history", dest="history", action="store_const", const=None,
                     help="append no history row (harness nightly's own runs: their row is the entry's)")
    run.add_argument("--resume", action="store_true",
                     help="continue the run in --out from its newest checkpoint (the same recipe; rl engine only)")
    run.add_argument("--ray-address", metavar="URL",
                     help="run the engine as a Ray job on the cluster whose dashboard is at URL (http://HEAD:8265; "
                          "default: RAY_ADDRESS when it is such a URL); the run dir must be on a path the head shares")

    sbatch = sub.add_parser("sbatch", help="write (and --submit) a Slurm batch script: Ray over the nodes, then run")
    _recipe_args(sbatch)
    sbatch.add_argument("--partition", help="the Slurm partition (#SBATCH --partition)")
    sbatch.add_argument("--out", help="run dir, on a filesystem every node shares (default: runs/<name>-<job id>)")
    sbatch.add_argument("--script", help="where to write the script (default: ./sbatch-<name>.sh)")
    sbatch.add_argument("--submit", action="store_true", help="submit it with sbatch; exit with sbatch's code")

    show = sub.add_parser("show", help="print the resolved recipe")
    _recipe_args(show)
    show.add_argument("--provenance", action="store_true", help="say which file or override set each leaf")

    plan = sub.add_parser("plan", help="derive, check and print the resource plan (--out FILE: also write it as JSON)")
    _recipe_args(plan)
    plan.add_argument("--out", metavar="FILE", help="also write the plan as JSON to FILE (default: write nothing)")

    validate = sub.add_parser("validate", help="resolve, validate and plan every recipe under the paths")
    validate.add_argument("paths", nargs="*", default=["recipes"], help="files or folders (default: recipes)")
    validate.add_argument("--self-test", dest="self_test", action="store_true",
                          help="self-test each thresholds file on the recorded runs its checks' why cites")
    validate.add_argument("--history", default="runs/history.sqlite",
                          help="history database, for margins in run-to-run standard deviations (default %(default)s)")

    check = sub.add_parser("check", help="judge a run dir (or a metrics file) against thresholds")
    check.add_argument("run_dir", help="a run dir, or a metrics file (metrics.jsonl, reference JSON)")
    check.add_argument("--thresholds", help="thresholds file (default: the recipe's checks.thresholds); "
                       "another file's verdict goes to RUN_DIR/checks/<its stem>/")
    check.add_argument("--hardware", help="hardware class of the thresholds to apply")
    check.add_argument("--steps", type=int, help="the step count the run must reach (default: the recipe's)")
    check.add_argument("--self-test", dest="self_test", action="store_true",
                       help="perturb the run's series to prove each check can fail; exit 1 if one cannot")
    check.add_argument("--no-report", dest="report", action="store_false",
                       help="print the verdict and write result.json and junit.xml only: no report.md, no plots "
                            "(for CI; same exit code). Without it, report.md and plots/ follow the verdict files")
    check.add_argument("--history", default="runs/history.sqlite",
                       help="history database, for margins in run-to-run standard deviations (default %(default)s)")

    compare = sub.add_parser("compare", help="per-step parity of two run dirs")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--tolerance", type=float, default=0.0, help="relative tolerance (default 0: exact)")
    compare.add_argument("--out", help="also write the verdicts to OUT/result.json and OUT/junit.xml")
    _calibrate_parser(sub)
    _suite_parsers(sub)

    importer = sub.add_parser("import", help="turn another system's test suites into recipes, thresholds, suites")
    source = importer.add_subparsers(dest="source", required=True, parser_class=_Parser)
    reference = source.add_parser("reference", help="a checkout of the reference system (NeMo-RL): its "
                                  "tests/test_suites scripts and lists, and their recipes (docs/import.md)")
    reference.add_argument("path", help="the reference checkout's root folder")
    reference.add_argument("--out", default="imported", help="where --write writes (default: %(default)s)")
    reference.add_argument("--write", action="store_true",
                           help="write the files; without it, print what would be written and the report")
    return parser


def _calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """calibrate: a recipe's thresholds from seeded runs, proven able to fail (docs/thresholds.md)."""
    calibrate = sub.add_parser("calibrate", help="derive a recipe's thresholds from seeded runs, prove each "
                               "can fail, write them with their evidence")
    _recipe_args(calibrate)
    calibrate.add_argument("--seeds", help="run the recipe once per seed (default 42,7,123)")
    calibrate.add_argument("--runs", nargs="+", metavar="DIR", help="calibrate on these run dirs instead of running")
    calibrate.add_argument("--hardware", help="the hardware class to calibrate (default: the runs' checks.hardware)")
    calibrate.add_argument("--out", help="the thresholds file to write (default: thresholds.yaml beside the runs, "
                           "runs/calibrate-NAME-TIME/)")
    calibrate.add_argument("--diff", action="store_true", help="print the proposed checks against the current file")
    calibrate.add_argument("-n", dest="workers", type=int, default=2,
                           help="seeds run at once (default 2: the 2-core CPU box; 1 on a one-GPU machine)")


def _suite_parsers(sub: argparse._SubParsersAction) -> None:
    """matrix, nightly and history: suites of recipes, their CI matrix, runs and history (docs/nightly.md)."""
    selection = _Parser(add_help=False)
    selection.add_argument("suite", help="suite name (recipes/suites/NAME.yaml) or file")
    selection.add_argument("--hardware", action="append", help="only entries of this hardware class (repeatable)")
    selection.add_argument("--tag", action="append", help="only entries with this tag (repeatable)")
    selection.add_argument("--shard", help="only shard I/N, shards balanced by estimated hours")

    matrix = sub.add_parser("matrix", parents=[selection], help="list a suite's entries or emit the CI matrix")
    matrix.add_argument("--format", choices=["text", "json", "github"], default="text",
                        help="github: strategy.matrix JSON {\"include\": [...]} (default: text)")

    nightly = sub.add_parser("nightly", parents=[selection], help="run a suite through pytest (+xdist)")
    nightly.add_argument("-n", dest="workers", type=int, default=1, help="parallel entries (pytest-xdist workers)")
    nightly.add_argument("--out", help="folder for run dirs, junit.xml, summary.md (default runs/nightly-SUITE-TIME)")
    nightly.add_argument("--entry", action="append", help="only this entry id (repeatable)")
    nightly.add_argument("--retries", type=int, default=1, help="retries of infrastructure failures (default 1)")
    nightly.add_argument("--history", default="runs/history.sqlite", help="history database (default %(default)s)")
    nightly.add_argument("--no-history", action="store_true", help="neither gate against nor append to history")

    history = sub.add_parser("history", help="the trend of a recipe's runs and its performance noise band")
    history.add_argument("recipe", help="recipe name or file")
    history.add_argument("--db", default="runs/history.sqlite", help="history database (default %(default)s)")
    history.add_argument("--entry", help="only this suite entry id")
    history.add_argument("--hardware", help="only this hardware class")
    history.add_argument("--last", type=int, help="show only the last N runs")
    history.add_argument("--window", type=int, help="gate window (default: the suite's)")
    history.add_argument("--min-runs", dest="min_runs", type=int, help="gate minimum runs (default: the suite's)")
    history.add_argument("--k", type=float, help="gate band width in MADs (default: the suite's)")
    history.add_argument("--rel-floor", dest="rel_floor", type=float, help="gate relative floor (default: the suite's)")


def _recipe_or_override(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse gives the first positional to RECIPE; an override there (`harness run a.b=c/d`) is
    moved to the overrides: `run` then runs its default recipe, the others need a recipe."""
    from harness.recipe_or_override import is_override  # noqa: PLC0415

    recipe = getattr(args, "recipe", None)
    if not hasattr(args, "overrides") or recipe is None or not is_override(recipe):
        return
    if args.command != "run":
        parser.error(f"{args.command} needs a RECIPE before its overrides ({recipe.split('=')[0]}=... is an override)")
    args.recipe, args.overrides = None, [recipe, *args.overrides]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Overrides may follow options (`harness run R --no-progress a.b=c`), which argparse's
    # positional parsing leaves over; anything else left over is a usage error.
    if extra and hasattr(args, "overrides") and not any(item.startswith("-") for item in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    _recipe_or_override(parser, args)
    from harness import commands  # noqa: PLC0415 - keeps `harness --help` instant
    from harness.errors import USER_ERRORS, capped_line, shown  # noqa: PLC0415

    try:
        return commands.COMMANDS[args.command](args)
    except USER_ERRORS as error:
        if os.environ.get("HARNESS_DEBUG"):
            raise
        lines = str(error).splitlines() or [""]  # one line per reason (the engine's refusals), each capped
        for line in lines[:MAX_ERROR_LINES]:
            sys.stderr.write(f"error: {capped_line(line)}\n")
        if len(lines) > MAX_ERROR_LINES:
            sys.stderr.write(f"error: ... and {len(lines) - MAX_ERROR_LINES} more\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as error:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if os.environ.get("HARNESS_DEBUG"):
            raise
        if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG:  # a path given us (Path.exists raises it)
            name = shown(str(error.filename)) if error.filename else "a path"
            sys.stderr.write(f"error: {name}: a path or a part of it is too long for this file system\n")
            return EXIT_BAD_INPUT
        sys.stderr.write(f"internal error: {type(error).__name__}: {capped_line(str(error))} "
                         "(HARNESS_DEBUG=1 shows the traceback)\n")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
