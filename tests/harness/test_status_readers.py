"""History, nightly and the launcher read status.json through harness.bounded (issue 12, item 9).

They report on runs, so a damaged status.json gives "unknown", never a hang or a crash.
"""

from __future__ import annotations

import os

import pytest

from harness.history import key_metrics
from harness.history.extract import check_verdicts, metrics_path
from harness.launch.status import read_status
from harness.nightly.runner import read_state

DAMAGED = {
    "fifo": None, "dev_zero": None, "list": "[1, 2]", "not_json": "{", "long_int": "1" * 5000,
    "huge_wall": '{"wall_s": 1%s, "state": ["x"], "variants": [1]}' % ("0" * 400),
    "deep": "[" * 100_000 + "]" * 100_000,
}


def _damage(path, how):
    if how == "fifo":
        os.mkfifo(path)
    elif how == "dev_zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text(DAMAGED[how])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", sorted(DAMAGED))
def test_a_damaged_status_json_reads_as_unknown(tmp_path, how):
    _damage(tmp_path / "status.json", how)
    _damage(tmp_path / "result.json", how)
    assert read_status(tmp_path / "status.json") is None or how == "huge_wall"  # that one is an object
    assert read_state(tmp_path) is None
    assert metrics_path(tmp_path) is None
    assert key_metrics(tmp_path).wall_s is None
    assert check_verdicts(tmp_path) == {}
