"""A full disk: DiskFullError (retriable), nothing half-written kept, later appends work."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from log_support import batch_values, make_batch, read_all, segment_files

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import DiskFullError
from twinlog.engine.log import DataLog, LogConfig, segment

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def _state(log: DataLog) -> tuple[int, int, bytes, list[int]]:
    sizes = [path.stat().st_size for path in segment_files(log.directory)]
    return log.log_end_offset, log.size_bytes(), read_all(log), sizes


@pytest.mark.usefixtures("disarmed")
@pytest.mark.parametrize("point", ["log.before_write", "log.before_fsync"])
def test_enospc_leaves_the_log_unchanged(tmp_path: Path, point: str) -> None:
    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_as_leader(make_batch(2, tag=1))
        before = _state(log)
        failpoints.arm(point, "enospc")
        with pytest.raises(DiskFullError, match=r"disk full while .*Free space") as caught:
            log.append_as_leader(make_batch(3, tag=2))
        assert caught.value.retriable
        assert _state(log) == before
        log.check()
        assert (
            log.append_as_leader(make_batch(3, tag=3)) == 2
        )  # the failpoint fired once; space is back
        assert batch_values(read_all(log))[-1] == b"3:2:".ljust(10, b"v")


def test_a_partial_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_pwritev = os.pwritev
    calls = []

    def half_then_full(fd: int, buffers: Sequence[bytes | memoryview], position: int) -> int:
        calls.append(position)
        if len(calls) == 1:
            joined = b"".join(bytes(b) for b in buffers)
            return os.pwrite(fd, joined[: len(joined) // 2], position)
        raise OSError(errno.ENOSPC, "No space left on device")

    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_as_leader(make_batch(2))
        before = _state(log)
        monkeypatch.setattr(os, "pwritev", half_then_full)
        with pytest.raises(DiskFullError, match="nothing was kept"):
            log.append_as_leader(make_batch(4, value_bytes=40))
        monkeypatch.setattr(os, "pwritev", real_pwritev)
        assert len(calls) == 2  # a short write, then the full disk
        assert _state(log) == before
        assert log.append_as_leader(make_batch(1)) == 2
        log.check()


@pytest.mark.usefixtures("disarmed")
def test_append_all_as_leader_rolls_back_every_batch_and_segment(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_as_leader(make_batch(2))
        before = _state(log)
        failpoints.arm("log.before_write", "enospc", on_hit=12)
        batches = [make_batch(2, value_bytes=40, tag=n) for n in range(20)]
        with pytest.raises(DiskFullError):
            log.append_all_as_leader(batches)
        assert _state(log) == before
        log.check()
        assert log.append_all_as_leader(batches) == (2, 42)
        log.check()


@pytest.mark.usefixtures("disarmed")
def test_enospc_on_the_final_fsync_of_append_all_as_leader(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, CONFIG) as log:
        before = _state(log)
        failpoints.arm("log.before_fsync", "enospc", on_hit=1)
        with pytest.raises(DiskFullError):
            log.append_all_as_leader([make_batch(2, value_bytes=40, tag=n) for n in range(3)])
        assert _state(log) == before
        log.check()


def test_enospc_while_rolling_leaves_no_new_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_create = segment.SegmentIndex.create

    def full_disk(*arguments: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device")

    with DataLog.open(tmp_path, CONFIG) as log:
        batch_bytes = len(make_batch(2, value_bytes=40))
        while log.size_bytes() + batch_bytes <= CONFIG.segment_bytes:
            log.append_as_leader(make_batch(2, value_bytes=40))
        assert len(segment_files(tmp_path)) == 1  # the next append must roll
        files_before = sorted(p.name for p in tmp_path.iterdir())
        before = _state(log)
        monkeypatch.setattr(segment.SegmentIndex, "create", full_disk)
        with pytest.raises(DiskFullError, match="rolling to a new segment"):
            log.append_as_leader(make_batch(2, value_bytes=40))
        monkeypatch.setattr(segment.SegmentIndex, "create", real_create)
        assert sorted(p.name for p in tmp_path.iterdir()) == files_before
        assert _state(log) == before
        log.append_as_leader(make_batch(2, value_bytes=40))
        assert len(segment_files(tmp_path)) == 2
        log.check()


@pytest.mark.usefixtures("disarmed")
def test_a_log_opens_on_a_full_disk_without_its_recovery_point(tmp_path: Path) -> None:
    # Recovery checkpoints the end it found; on a full disk that write fails. The
    # checkpoint is an optimisation: the log opens, the next open scans again.
    with DataLog.open(tmp_path, CONFIG) as log:
        for tag in range(5):
            log.append_as_leader(make_batch(2, value_bytes=40, tag=tag))
        expected = read_all(log)
    (tmp_path / "recovery-point").unlink()  # as after a kill: recovery must scan
    failpoints.arm("file.before_write", "enospc", times=1000)
    with DataLog.open(tmp_path, CONFIG) as log:
        assert read_all(log) == expected
        assert log.log_end_offset == 10
    assert not (tmp_path / "recovery-point").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.usefixtures("disarmed")
def test_a_checkpoint_on_a_full_disk_raises_disk_full(tmp_path: Path) -> None:
    # Retention must write the new log start before deleting: on a full disk that
    # write fails typed and retriable, and nothing is deleted.
    with DataLog.open(tmp_path, CONFIG) as log:
        for tag in range(12):
            log.append_as_leader(make_batch(2, value_bytes=40, tag=tag))
        files_before = segment_files(tmp_path)
        assert len(files_before) > 2
        failpoints.arm("file.before_write", "enospc")
        with pytest.raises(DiskFullError, match=r"disk full while replacing .*log-start-offset"):
            log.delete_segments_before(files_before_offset(log))
        assert segment_files(tmp_path) == files_before
        log.check()


def files_before_offset(log: DataLog) -> int:
    """The base offset of the last segment: deleting before it removes every sealed one."""
    return max(int(path.name.split(".")[0]) for path in segment_files(log.directory))


@pytest.mark.usefixtures("disarmed")
def test_truncate_to_on_a_full_disk_deletes_the_recovery_point(tmp_path: Path) -> None:
    # The recovery point must never stay past a truncation; when it cannot be moved
    # back (no space) it goes (no space needed), and the next open scans everything.
    with DataLog.open(tmp_path, CONFIG) as log:
        for tag in range(3):
            log.append_as_leader(make_batch(2, value_bytes=40, tag=tag))
        log.flush()
        expected = read_all(log)
        log.append_all_as_leader([make_batch(2, value_bytes=40, tag=9)])  # a copy to cut
        failpoints.arm("file.before_write", "enospc", times=1000)
        assert log.truncate_to(6) > 0
        assert not (tmp_path / "recovery-point").exists()
        assert read_all(log) == expected
        log.check()
    failpoints.disarm_all()
    with DataLog.open(tmp_path, CONFIG) as log:
        assert log.recovery_report.recovery_point is None  # scanned all
        assert read_all(log) == expected
