"""replace_file on a full disk: DiskFullError (retriable), the old file whole, no leftovers."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from twinlog.engine.base import atomic_file, failpoints
from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import DiskFullError


@pytest.mark.usefixtures("disarmed")
@pytest.mark.parametrize("point", ["file.before_write", "file.before_fsync"])
def test_enospc_raises_disk_full_and_keeps_the_old_file(tmp_path: Path, point: str) -> None:
    target = tmp_path / "ids"
    replace_file(target, with_checksum(b"old"))
    failpoints.arm(point, "enospc")
    with pytest.raises(DiskFullError, match=r"disk full while replacing .*ids") as caught:
        replace_file(target, with_checksum(b"new"))
    assert caught.value.retriable
    assert "free space" in str(caught.value).lower()
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.ENOSPC
    assert read_checked(target) == b"old"
    assert sorted(os.listdir(tmp_path)) == ["ids"]  # the temporary file was removed
    replace_file(target, with_checksum(b"new"))  # space is back
    assert read_checked(target) == b"new"


def test_a_failing_cleanup_does_not_mask_the_disk_full_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ENOSPC on the write, then the clean-up fails too (EIO on close, unlink refused):
    # the caller still sees the first error, typed.
    def failing_write(descriptor: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    real_close = os.close

    def failing_close(descriptor: int) -> None:
        real_close(descriptor)
        raise OSError(errno.EIO, "Input/output error")

    def failing_unlink(path: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomic_file.os, "write", failing_write)
    monkeypatch.setattr(atomic_file.os, "close", failing_close)
    monkeypatch.setattr(atomic_file.os, "unlink", failing_unlink)
    with pytest.raises(DiskFullError, match="disk full"):
        replace_file(tmp_path / "meta", b"contents")


def test_other_errors_stay_os_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        replace_file(tmp_path / "missing-directory" / "meta", b"contents")
