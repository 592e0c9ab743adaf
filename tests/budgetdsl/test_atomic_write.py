"""Files are written whole or not at all, several of them together."""

import os

import pytest

from budgetdsl.io import atomic_write
from budgetdsl.io.atomic_write import write_file, write_files


def test_new_and_replaced_files(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.sh"
    a.write_text("old\n")
    os.chmod(a, 0o640)
    write_files({a: "new\n", b: b"#!/bin/bash\n"}, mode=0o755)
    assert a.read_text() == "new\n" and b.read_bytes() == b"#!/bin/bash\n"
    assert os.stat(a).st_mode & 0o777 == 0o640  # an existing file keeps its permissions
    assert os.stat(b).st_mode & 0o777 == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.sh"]  # no temp files left


def test_a_failure_leaves_every_file_as_it_was(tmp_path, monkeypatch):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("a\n")
    b.write_text("b\n")
    real_replace = os.replace
    calls = []

    def replace(src, dst):  # the disk fills up after the temp files are written, before any rename
        calls.append(dst)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_write.os, "replace", replace)
    with pytest.raises(OSError):
        write_files({a: "A\n", b: "B\n"})
    monkeypatch.setattr(atomic_write.os, "replace", real_replace)
    assert (a.read_text(), b.read_text()) == ("a\n", "b\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml"]


def test_one_file(tmp_path):
    write_file(tmp_path / "x.json", "{}\n")
    assert (tmp_path / "x.json").read_text() == "{}\n"
