"""truncate_to: cut at a batch boundary, across segments, durably; then append again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from log_support import batch_values, make_batch, read_all, segment_files

from twinlog.engine.base.errors import OffsetOutOfRangeError
from twinlog.engine.log import DataLog, LogConfig

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100)


def _log_with(directory: Path, batches: int = 20) -> tuple[DataLog, list[bytes]]:
    log = DataLog.open(directory, CONFIG)
    written = [make_batch(3, value_bytes=20, tag=n) for n in range(batches)]
    log.append_all_as_leader(written)
    return log, written


@pytest.mark.parametrize("keep_batches", [0, 1, 5, 6, 13, 19, 20])
def test_truncate_to_every_kind_of_boundary(tmp_path: Path, keep_batches: int) -> None:
    log, written = _log_with(tmp_path)
    size_before = log.size_bytes()
    removed = log.truncate_to(3 * keep_batches)
    assert removed == size_before - sum(len(b) for b in written[:keep_batches])
    assert log.log_end_offset == 3 * keep_batches
    assert log.size_bytes() == size_before - removed
    assert batch_values(read_all(log)) == batch_values(b"".join(written[:keep_batches]))
    last = log.last_batch_header()
    assert (last.next_offset if last else 0) == 3 * keep_batches
    log.check()
    assert log.append_as_leader(make_batch(1, tag=77)) == 3 * keep_batches
    log.close()
    with DataLog.open(tmp_path, CONFIG) as reopened:
        assert reopened.recovery_report.batches_checked == 0  # the cut was checkpointed
        assert reopened.log_end_offset == 3 * keep_batches + 1
        reopened.check()


def test_truncate_inside_a_batch_is_refused(tmp_path: Path) -> None:
    log, _ = _log_with(tmp_path)
    with pytest.raises(
        ValueError, match=r"offset 7 is inside the batch holding offsets 6\.\.8.*6 or 9"
    ):
        log.truncate_to(7)
    assert log.log_end_offset == 60
    log.close()


def test_truncate_outside_the_log_is_refused(tmp_path: Path) -> None:
    log, _ = _log_with(tmp_path)
    assert log.truncate_to(60) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(61)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(-1)
    log.close()


def test_truncate_removes_later_segment_files(tmp_path: Path) -> None:
    log, _ = _log_with(tmp_path)
    files_before = segment_files(tmp_path)
    assert len(files_before) > 3
    log.truncate_to(int(files_before[1].stem))
    assert segment_files(tmp_path) == files_before[:1]
    assert not (tmp_path / (files_before[2].stem + ".index")).exists()
    log.check()
    log.close()


def test_a_read_racing_a_truncation_is_answered_from_the_cut_log(tmp_path: Path) -> None:
    """A follower cutting a divergent suffix while its log is read (a replica fetch, a
    tool): the read meets a shorter file, which is the cut, not damage; it is read again."""
    log = DataLog.open(tmp_path / "log")
    for number in range(40):
        log.append_as_leader(make_batch(tag=number))
    stop = threading.Event()
    cuts = []

    def cut_and_grow() -> None:
        while not stop.is_set() and len(cuts) < 400:
            cuts.append(log.truncate_to(2))
            for number in range(38):
                log.append_as_leader(make_batch(tag=number))

    cutter = threading.Thread(target=cut_and_grow)
    cutter.start()
    try:
        reads = 0
        while cutter.is_alive() and reads < 5000:
            try:
                log.read(2, 1 << 20)
            except OffsetOutOfRangeError:
                pass  # the cut came first and the suffix is not back yet
            reads += 1
    finally:
        stop.set()
        cutter.join(30)
        log.close()
    assert cuts and reads
