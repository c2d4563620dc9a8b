"""docs/first-recipe.md, walked through: every command block in it is run, in order, in a scratch
copy of recipes/ and thresholds/, so the guide and what the harness does cannot drift apart.

The doc is parsed, never restated here: a ```bash block must exit 0 (```bash exit=N: N), and a
```text block right after one lists lines its output must hold (`...` inside a line: any text;
a line of just `...`: lines left out). Any other fence is refused, so nothing in the guide goes
unrun by accident.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "first-recipe.md"
FENCE = re.compile(r"^```(.*)$")
BLOCK_TIMEOUT_S = 600  # under .ci/run's 900 s a test


@dataclass
class Block:
    line: int
    commands: str
    exit_code: int = 0
    expect: tuple[str, ...] = ()


def parse(text: str) -> list[Block]:
    """The doc's command blocks with their expected exit codes and output."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i, after_bash = 0, False  # after_bash: only blank lines since a command block closed
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            after_bash = after_bash and not lines[i].strip()
            i += 1
            continue
        info, start = fence.group(1).strip(), i + 1
        end = next((j for j in range(start, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{DOC.name}:{i + 1}: a fence that is never closed"
        body = lines[start:end]
        if info == "text":
            assert after_bash, f"{DOC.name}:{i + 1}: a text block must follow a command block directly"
            blocks[-1].expect = tuple(line for line in body if line.strip())
            after_bash = False
        else:
            word, *marks = info.split() or [""]
            assert word == "bash" and len(marks) <= 1 and all(re.fullmatch(r"exit=\d+", m) for m in marks), \
                f"{DOC.name}:{i + 1}: fence {info!r} is neither ```bash [exit=N] nor ```text"
            blocks.append(Block(line=i + 1, commands="\n".join(body) + "\n",
                                exit_code=int(marks[0].split("=")[1]) if marks else 0))
            after_bash = True
        i = end + 1
    return blocks


def matches(expected: str, line: str) -> bool:
    """`expected` with `...` as any text (possibly none) matches the whole of `line` (both stripped)."""
    pattern = ".*".join(re.escape(part) for part in expected.strip().split("..."))
    return re.fullmatch(pattern, line.strip()) is not None


def missing(expect: tuple[str, ...], output: str) -> list[str]:
    """The expected lines no output line matches."""
    lines = output.splitlines()
    return [want for want in expect if want.strip() != "..." and not any(matches(want, line) for line in lines)]


def test_the_doc_parses_into_command_blocks_with_the_commands_it_teaches():
    blocks = parse(DOC.read_text(encoding="utf-8"))
    text = "".join(b.commands for b in blocks)
    for command in ("harness validate ", "harness run ", "harness check ", "harness calibrate "):
        assert command in text, f"{DOC.name} runs no `{command.strip()}`"
    assert any(b.exit_code == 2 for b in blocks), "the refused layer pattern is shown failing"


def test_the_matcher():
    assert matches("PASS  x  = ... > 0.3", "  PASS  x  = 0.5625 > 0.3")
    assert not matches("PASS  x  = ... > 0.3", "PASS  x  = 0.5625 > 0.35")
    assert not matches("x ...", "time x 1") and matches("... x ...", "time x 1")  # a line is matched whole
    assert missing(("a ...", "...", "c"), "a b\nd") == ["c"]
    with pytest.raises(AssertionError, match="neither"):
        parse("```sh\nls\n```\n")
    with pytest.raises(AssertionError, match="follow a command block"):
        parse("```text\nx\n```\n")


@pytest.mark.integration
@pytest.mark.slow(seconds=240)
def test_every_command_in_the_doc_runs_as_it_says(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    for folder in ("recipes", "thresholds"):  # the doc writes its recipe into these: a copy, not ours
        shutil.copytree(REPO / folder, work / folder)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "harness").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m harness "$@"\n')
    (bin_dir / "harness").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for block in parse(DOC.read_text(encoding="utf-8")):
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.commands], cwd=work, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=BLOCK_TIMEOUT_S)
        where = f"{DOC.name}:{block.line}:\n{block.commands}--- output:\n{done.stdout[-6000:]}"
        assert done.returncode == block.exit_code, f"exit {done.returncode}, the doc says {block.exit_code}: {where}"
        absent = missing(block.expect, done.stdout)
        assert not absent, f"not in the output: {absent}: {where}"
