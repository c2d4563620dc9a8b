"""harness.bounded: only regular files, never past a cap, one-line reasons."""

import os

import pytest

from harness.bounded import CAPS, BoundedReadError, read_bytes, read_text


def test_regular_file_read_whole(tmp_path):
    p = tmp_path / "a.json"
    p.write_bytes(b'{"a": 1}\n')
    assert read_bytes(p, kind="json") == b'{"a": 1}\n'


def test_fifo_refused_without_blocking(tmp_path):
    p = tmp_path / "status.json"
    os.mkfifo(p)
    with pytest.raises(BoundedReadError, match="not a regular file \\(a FIFO\\)"):
        read_bytes(p, kind="status")


def test_character_device_refused():
    with pytest.raises(BoundedReadError, match="character device"):
        read_bytes("/dev/zero", kind="status")


def test_directory_refused(tmp_path):
    with pytest.raises(BoundedReadError, match="a directory"):
        read_bytes(tmp_path, kind="json")


def test_over_cap_refused(tmp_path, monkeypatch):
    p = tmp_path / "status.json"
    p.write_bytes(b"x" * 101)
    monkeypatch.setitem(CAPS, "status", 100)
    with pytest.raises(BoundedReadError, match="larger than the 100 byte cap"):
        read_bytes(p, kind="status")


def test_missing_file_one_line(tmp_path):
    with pytest.raises(BoundedReadError) as info:
        read_bytes(tmp_path / "nope", kind="json")
    assert "\n" not in str(info.value) and "No such file" in str(info.value)


def test_bad_utf8_names_line(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(BoundedReadError, match=r"t.yaml:2: not valid UTF-8 \(byte 0xff\)"):
        read_text(p, kind="thresholds")
