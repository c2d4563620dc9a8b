"""junit.xml: one testcase per verdict, so CI systems show each check as a test.

Built with ElementTree, which escapes markup; characters XML 1.0 cannot hold at all (terminal
colour codes, NULs from a log tail) are replaced by visible `\\xNN` escapes first, since a CI
system rejects the whole file for one of them. With no verdicts the suite holds one failing
testcase: a run that checked nothing must not show up green.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from harness.checks.verdict import Verdict
from harness.report.atomic import write_atomic

# The complement of XML 1.0's Char production (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
# [#x10000-#x10FFFF]), spelled out: compiling the negated class costs ~3 ms on every `harness check`.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: object) -> str:
    """`text` as a string holding only characters XML 1.0 allows."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def failure_text(v: Verdict) -> str:
    """The body of a <failure>: everything a reader needs without opening result.json."""
    lines = [v.message]
    if v.expr:
        lines.append(f"expr: {v.expr}")
    if v.value is not None:
        lines.append(f"value: {v.value!r}")
    if v.metrics:
        lines.append(f"metrics: {', '.join(v.metrics)}")
    if v.why:
        lines.append(f"why: {v.why}")
    if v.since:
        lines.append(f"since: {v.since}")
    if v.extra.get("error"):
        lines.append(f"error:\n{v.extra['error']}")  # the whole error, when the message holds its first line
    return "\n".join(lines)


def junit_tree(*, suite: str, verdicts: Sequence[Verdict], wall_s: float | None = None) -> ET.ElementTree:
    cases = list(verdicts) or [
        Verdict(name="checks_ran", kind="harness", ok=False, message="no check produced a verdict")
    ]
    num_failed = sum(not v.ok for v in cases)
    time_attr = {"time": f"{wall_s:.3f}"} if wall_s is not None else {}
    counts = {"tests": str(len(cases)), "failures": str(num_failed), "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", {"name": xml_safe(suite), **counts, **time_attr})
    node = ET.SubElement(root, "testsuite", {"name": xml_safe(suite), **counts, **time_attr})
    for v in cases:
        case = ET.SubElement(node, "testcase", {"classname": xml_safe(f"{suite}.{v.kind}"), "name": xml_safe(v.name)})
        if v.ok:
            ET.SubElement(case, "system-out").text = xml_safe(v.message)
        else:
            failure = ET.SubElement(case, "failure", {"message": xml_safe(v.message), "type": xml_safe(v.kind)})
            failure.text = xml_safe(failure_text(v))
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, *, suite: str, verdicts: Sequence[Verdict], wall_s: float | None = None) -> Path:
    """Writes the JUnit XML file atomically and returns its path."""
    tree = junit_tree(suite=suite, verdicts=verdicts, wall_s=wall_s)
    return write_atomic(Path(path), lambda f: tree.write(f, encoding="utf-8", xml_declaration=True))
