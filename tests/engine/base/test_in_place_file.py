"""``write_in_place``: a mark of one length is rewritten in place (same inode, no
temporary file); a missing file or another length is replaced; a full disk leaves the
old contents. ``read_consistent`` reads again while its answer is not consistent."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from twinlog.engine.base import in_place_file
from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.base.in_place_file import read_consistent, write_in_place


def test_a_missing_file_is_made_then_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "mark"
    write_in_place(path, b"first version\n")
    inode = path.stat().st_ino
    write_in_place(path, b"other version\n")
    assert path.read_bytes() == b"other version\n"
    assert path.stat().st_ino == inode  # rewritten, not replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mark"]


def test_another_length_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mark"
    write_in_place(path, b"short\n")
    inode = path.stat().st_ino
    write_in_place(path, b"a longer version\n")
    assert path.read_bytes() == b"a longer version\n"
    assert path.stat().st_ino != inode
    write_in_place(path, b"tiny\n")  # shorter: no stale tail left behind
    assert path.read_bytes() == b"tiny\n"


def test_a_full_disk_leaves_the_old_contents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mark"
    write_in_place(path, b"version 1\n")

    def no_space(*_: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(in_place_file.os, "pwrite", no_space)
    with pytest.raises(DiskFullError, match=r"rewriting .*mark.* in place"):
        write_in_place(path, b"version 2\n")
    assert path.read_bytes() == b"version 1\n"


def test_read_consistent_reads_again_until_consistent() -> None:
    answers = iter(["torn", "torn", "whole"])
    assert read_consistent(lambda: next(answers), lambda a: a != "torn") == "whole"


def test_read_consistent_gives_up_after_a_bounded_number_of_reads() -> None:
    calls = []

    def read() -> str:
        calls.append(1)
        return "torn"

    assert read_consistent(read, lambda a: a != "torn") == "torn"
    assert len(calls) == in_place_file.READ_ATTEMPTS_MAX


def test_file_descriptors_are_not_left_open(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for number in range(50):
        write_in_place(tmp_path / "mark", b"%04d\n" % number)
    assert len(os.listdir("/proc/self/fd")) == before
