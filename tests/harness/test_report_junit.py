"""junit.xml parses, has one testcase per verdict, and survives hostile text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.checks.verdict import Verdict
from harness.report import write_junit

PASS = Verdict(name="reward_rises", kind="threshold", ok=True, message="0.8 >= 0.5", value=0.8)
HOSTILE = 'a < b & "c" > \'d\'\nsecond line \x1b[31mred\x1b[0m \x00'
FAIL = Verdict(name="parity <legacy,tq>", kind="parity", ok=False, message=HOSTILE, value=0.25,
               expr="max_abs_diff(train/loss) <= 0", why="rows reordered", metrics=("train/loss",))  # fmt: skip


def parse(path):
    return ET.parse(path).getroot()


def test_one_testcase_per_verdict_with_failures(tmp_path):
    root = parse(write_junit(tmp_path / "junit.xml", suite="arith_grpo_cpu", verdicts=[PASS, FAIL], wall_s=12.5))
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "arith_grpo_cpu" and suite.get("time") == "12.500"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["reward_rises", "parity <legacy,tq>"]
    assert [c.get("classname") for c in cases] == ["arith_grpo_cpu.threshold", "arith_grpo_cpu.parity"]
    assert cases[0].find("failure") is None and cases[0].find("system-out").text == "0.8 >= 0.5"
    failure = cases[1].find("failure")
    assert failure.get("type") == "parity"
    assert failure.get("message").startswith('a < b & "c" > \'d\'\nsecond line \\x1b[31mred')
    assert failure.get("message").endswith("\\x00")
    for needle in ("expr: max_abs_diff(train/loss) <= 0", "value: 0.25", "why: rows reordered", "metrics: train/loss"):
        assert needle in failure.text


def test_no_verdicts_is_a_failing_suite(tmp_path):
    root = parse(write_junit(tmp_path / "junit.xml", suite="s", verdicts=[]))
    assert root.get("tests") == "1" and root.get("failures") == "1" and root.get("time") is None
    assert root.find("testsuite/testcase/failure").get("message") == "no check produced a verdict"


def test_declaration_and_encoding(tmp_path):
    path = write_junit(tmp_path / "sub" / "junit.xml", suite="s", verdicts=[PASS])
    assert path.read_bytes().startswith(b"<?xml version='1.0' encoding='utf-8'?>")
