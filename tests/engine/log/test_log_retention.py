"""Retention: whole segments by bytes and by age, never the active one; the start persists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from log_support import TIMESTAMP_MS, batch_values, make_batch, read_all, segment_files

from twinlog.engine.base.errors import OffsetOutOfRangeError
from twinlog.engine.log import DataLog, LogConfig, LogReader
from twinlog.engine.log.checkpoints import read_log_start_offset, write_log_start_offset
from twinlog.engine.log.retention import count_segments_below, count_segments_to_delete

DAY_MS = 24 * 3600 * 1000


@dataclass
class FakeSegment:
    size_bytes: int
    timestamp_ms: int

    def largest_timestamp_ms(self) -> int:
        return self.timestamp_ms


@pytest.mark.parametrize(
    ("retention_bytes", "retention_ms", "expected"),
    [
        (-1, -1, 0),  # unlimited
        (250, -1, 2),  # 400 bytes in all; dropping 100+50 leaves 250 >= 250
        (251, -1, 1),
        (0, -1, 3),  # everything sealed may go; the active 100 stays regardless
        (-1, 1000, 1),  # only the first is older than now - 1000 (the third is too: no holes)
        (-1, 5000, 0),
        (251, 1000, 1),
        (100, 1000, 3),  # the longer of the two runs
    ],
)
def test_count_segments_to_delete(retention_bytes: int, retention_ms: int, expected: int) -> None:
    sealed = [FakeSegment(100, 0), FakeSegment(50, 4000), FakeSegment(150, 10)]
    config = LogConfig(retention_bytes=retention_bytes, retention_ms=retention_ms)
    assert count_segments_to_delete(sealed, 400, 4500, config) == expected


def _filled_log(directory: Path, config: LogConfig, batches: int = 30) -> DataLog:
    log = DataLog.open(directory, config)
    for n in range(batches):
        log.append_as_leader(
            make_batch(2, value_bytes=30, timestamp_ms=TIMESTAMP_MS + n * 1000, tag=n)
        )
    return log


def test_retention_by_bytes_deletes_oldest_whole_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500, retention_bytes=1200, retention_ms=-1)
    with _filled_log(tmp_path, config) as log:
        before = [p.name for p in segment_files(tmp_path)]
        size_before = log.size_bytes()
        deleted = log.apply_retention()
        after = [p.name for p in segment_files(tmp_path)]
        assert deleted > 0 and after == before[deleted:]
        assert log.size_bytes() >= 1200
        assert log.size_bytes() - 500 < 1200  # one more segment would have gone under
        assert log.size_bytes() < size_before
        assert log.log_start_offset == int(after[0][:20])
        assert not (tmp_path / before[0].replace(".log", ".index")).exists()
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0, 100)
        assert batch_values(read_all(log))[0] == f"{log.log_start_offset // 2}:0:".encode().ljust(
            30, b"v"
        )
        assert log.apply_retention() == 0  # idempotent
        log.check()


def test_retention_by_age_uses_the_newest_timestamp_of_each_segment(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500, retention_ms=DAY_MS)
    with _filled_log(tmp_path, config) as log:
        segments = segment_files(tmp_path)
        # now = one day after the newest batch of the second segment: the first two go.
        second_newest = max(
            h.max_timestamp_ms
            for h in log.iter_headers(int(segments[1].stem))
            if h.base_offset < int(segments[2].stem)
        )
        assert log.apply_retention(now_ms=second_newest + DAY_MS) == 1
        assert log.apply_retention(now_ms=second_newest + DAY_MS + 1) == 1
        assert log.log_start_offset == int(segments[2].stem)
        log.check()


def test_the_active_segment_is_never_deleted(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500, retention_ms=0, retention_bytes=0)
    with _filled_log(tmp_path, config) as log:
        end = log.log_end_offset
        sealed = len(segment_files(tmp_path)) - 1
        assert sealed > 1
        assert log.apply_retention(now_ms=TIMESTAMP_MS + 10 * DAY_MS) == sealed
        assert len(segment_files(tmp_path)) == 1
        assert log.log_end_offset == end
        assert log.log_start_offset == int(segment_files(tmp_path)[0].stem)
        assert read_all(log)  # the active segment's batches are all there
        assert log.append_as_leader(make_batch(1)) == end


def test_log_start_offset_survives_reopen(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500, retention_bytes=1000)
    with _filled_log(tmp_path, config) as log:
        log.apply_retention()
        start = log.log_start_offset
        assert start > 0
    assert read_log_start_offset(tmp_path) == start
    with DataLog.open(tmp_path, config) as log:
        assert log.log_start_offset == start
        with pytest.raises(OffsetOutOfRangeError):
            log.read(start - 1, 10)
    assert LogReader(tmp_path).log_start_offset() == start


def test_open_finishes_an_interrupted_retention(tmp_path: Path) -> None:
    # The checkpoint is written before the files are deleted; a crash in between
    # must not bring the old segments back.
    config = LogConfig(segment_bytes=500)
    with _filled_log(tmp_path, config):
        pass
    segments = segment_files(tmp_path)
    write_log_start_offset(tmp_path, int(segments[2].stem))
    with DataLog.open(tmp_path, config) as log:
        assert log.log_start_offset == int(segments[2].stem)
        assert segment_files(tmp_path) == segments[2:]
        assert len(log.recovery_report.segments_deleted) == 2
        log.check()


def test_delete_segments_before(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=500)
    with _filled_log(tmp_path, config) as log:
        segments = segment_files(tmp_path)
        second, third = int(segments[1].stem), int(segments[2].stem)
        assert log.delete_segments_before(second - 1) == 0  # the first still holds second - 1
        assert log.delete_segments_before(third) == 2
        assert log.log_start_offset == third
        assert log.delete_segments_before(10**9) == len(segments) - 3  # never the active one
        assert len(segment_files(tmp_path)) == 1
        log.check()


def test_count_segments_below_a_protected_offset() -> None:
    ends = [10, 20, 30]  # segments [0, 10), [10, 20), [20, 30)
    assert count_segments_below(ends, 0) == 0
    assert count_segments_below(ends, 19) == 1  # [10, 20) holds 19
    assert count_segments_below(ends, 20) == 2
    assert count_segments_below(ends, 100) == 3


def test_retention_keeps_the_segments_from_a_protected_offset(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400, retention_bytes=400, retention_ms=-1)
    with DataLog.open(tmp_path, config) as log:
        for tag in range(20):
            log.append_as_leader(make_batch(3, tag=tag))
        bases = [int(path.stem) for path in segment_files(tmp_path)]
        protected = bases[2] + 1  # inside the third segment
        assert log.apply_retention(protected_from_offset=lambda: protected) == 2
        assert log.log_start_offset == bases[2]
        assert log.apply_retention(protected_from_offset=lambda: None) > 0
        assert log.log_start_offset > bases[2]
