"""Every file in tests/data/bad_recipes/ must fail with one clear line, from the API and the CLI.

Each file starts with `# expect: <substring of the error>`; an optional second line
`# args: {"overrides": [...], "scale": "..."}` gives the command-line part of the case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.recipe import RecipeError, load_recipe

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "bad_recipes"
CASES = sorted(CORPUS.glob("*.yaml"))


def _header(path: Path) -> tuple[str, dict]:
    lines = path.read_bytes().split(b"\n")
    first = lines[0].decode("ascii")
    assert first.startswith("# expect: "), f"{path.name}: first line must be '# expect: ...'"
    args = {}
    if len(lines) > 1 and lines[1].startswith(b"# args: "):
        args = json.loads(lines[1].decode("ascii").removeprefix("# args: "))
    return first.removeprefix("# expect: "), args


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_bad_recipe_fails_with_one_line(path: Path, monkeypatch):
    monkeypatch.chdir(ROOT)
    expect, args = _header(path)
    with pytest.raises(RecipeError) as info:
        load_recipe(path, args.get("overrides", ()), scale=args.get("scale"))
    message = str(info.value)
    assert "\n" not in message
    assert expect in message, message
    assert path.name in message, message


CLI_CASES = ["unknown_key_depth3", "alias_bomb", "defaults_cycle3_a"]


@pytest.mark.parametrize("stem", CLI_CASES)
def test_cli_show_exits_2_with_one_line(stem: str):
    path = CORPUS / f"{stem}.yaml"
    expect, _ = _header(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "show", str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and expect in lines[0], lines[0]



def _cli_cases() -> list[tuple[str, Path]]:
    """Every case for show and run; for validate (which takes no overrides), the file-only ones."""
    cases = [(command, path) for command in ("show", "run") for path in CASES]
    return cases + [("validate", path) for path in CASES if not _header(path)[1]]


@pytest.mark.parametrize(("command", "path"), _cli_cases(), ids=lambda x: getattr(x, "stem", x))
def test_every_bad_recipe_is_exit_2_from_the_cli(command: str, path: Path, monkeypatch, capsys, tmp_path):
    """In-process through `harness.cli.main`: exit 2, one line, no traceback, nothing launched."""
    from harness.cli import main

    monkeypatch.chdir(ROOT)
    expect, args = _header(path)
    argv = [command, str(path)]
    if command != "validate":
        argv += list(args.get("overrides", ()))
        if args.get("scale"):
            argv += ["--scale", args["scale"]]
            if args["scale"] != "tiny":  # argparse refuses the value before the recipe is read
                expect = "invalid choice"
    if command == "run":
        argv += ["--out", str(tmp_path / "run"), "--dry-run"]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    if command == "validate":
        assert path.name in err and "FAIL" in err, err
    else:
        assert err.count("\n") == 1 and err.startswith("error: ") and expect in err, err
    assert not (tmp_path / "run").exists()
