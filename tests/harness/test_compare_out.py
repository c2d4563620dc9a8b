"""`harness compare --out DIR` (issue 35): the comparison's verdicts whole in result.json and
junit.xml, for a CI gate; never in either run dir, whose own verdict it would replace."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from test_cli import write_run  # tests/harness is on sys.path (rootdir-less test dir)

from harness.cli import main

LONG = 1.2345678901234567e-9


def test_compare_writes_its_verdicts_whole_to_out(tmp_path, capsys):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", reward=lambda s: 0.1 * s + LONG)
    out = tmp_path / "gate" / "parity"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 1
    assert f"wrote {out / 'result.json'}, junit.xml" in capsys.readouterr().out
    result = json.loads((out / "result.json").read_text())
    assert result["recipe"] == "compare:a:b" and result["ok"] is False and "parity:metrics" in result["failed"]
    [metrics] = [v for v in result["verdicts"] if v["name"] == "parity:metrics"]
    assert f"b={0.1 + LONG!r}" in metrics["message"]  # whole, as on the console
    cases = {c.get("name"): c for c in ET.parse(out / "junit.xml").getroot().iter("testcase")}
    assert f"b={0.1 + LONG!r}" in cases["parity:metrics"].find("failure").get("message")
    assert not (a / "result.json").exists() and not (b / "result.json").exists()


def test_compare_without_out_writes_nothing_and_refuses_a_run_dir_as_out(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["compare", str(a), str(b)]) == 1  # the synthetic runs log no log-prob digest
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert main(["compare", str(a), str(b), "--out", str(b)]) == 2
    assert "is one of the compared run dirs" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
