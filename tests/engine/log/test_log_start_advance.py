"""``DataLog.advance_log_start`` (DeleteRecords' engine half): the start moves to any offset,
inside a segment too; reads below it fail; whole segments below it go; a restart keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_support import batch_values, headers_of, make_batch, read_all, segment_files

from twinlog.engine.base.errors import OffsetOutOfRangeError
from twinlog.engine.log import DataLog, LogConfig

CONFIG = LogConfig(segment_bytes=500, retention_ms=-1)


def _filled_log(directory: Path, batches: int = 30) -> DataLog:
    log = DataLog.open(directory, CONFIG)
    for n in range(batches):
        log.append_as_leader(make_batch(2, value_bytes=30, tag=n))  # offsets 2n, 2n + 1
    return log


def test_the_start_moves_inside_a_segment_and_whole_segments_below_go(tmp_path: Path) -> None:
    with _filled_log(tmp_path) as log:
        before = segment_files(tmp_path)
        assert len(before) > 3
        assert log.advance_log_start(23) == 23  # inside the batch 22..23
        assert log.log_start_offset == 23
        kept = segment_files(tmp_path)
        assert kept == before[len(before) - len(kept) :]
        assert int(kept[0].name[:20]) <= 23  # the segment holding it stays
        assert len(kept) > 1 and int(kept[1].name[:20]) > 23
        with pytest.raises(OffsetOutOfRangeError) as refused:
            log.read(22, 1000)
        assert refused.value.log_start_offset == 23
        # From the start, the batch holding it (as Kafka reads a start inside a batch).
        assert headers_of(log.read(23, 1))[0].base_offset == 22
        assert batch_values(read_all(log))[0] == b"11:0:".ljust(30, b"v")
        assert log.epochs.latest_epoch == 0
        log.check()
    with DataLog.open(tmp_path, CONFIG) as reopened:
        assert reopened.log_start_offset == 23
        with pytest.raises(OffsetOutOfRangeError):
            reopened.read(20, 1000)
        reopened.check()


def test_the_start_never_moves_back_nor_past_the_end(tmp_path: Path) -> None:
    with _filled_log(tmp_path, batches=5) as log:
        assert log.advance_log_start(4) == 4
        assert log.advance_log_start(2) == 4  # a no-op
        with pytest.raises(OffsetOutOfRangeError, match="at most 10"):
            log.advance_log_start(11)
        assert log.log_start_offset == 4
        assert log.advance_log_start(10) == 10  # everything: the log is empty, not closed
        assert read_all(log) == b""
        assert log.append_as_leader(make_batch(1)) == 10
        assert log.read(10, 1000)
        log.check()


def test_a_protected_offset_stops_the_start(tmp_path: Path) -> None:
    with _filled_log(tmp_path, batches=10) as log:
        assert log.advance_log_start(15, protected_from_offset=lambda: 6) == 6
        assert log.advance_log_start(15, protected_from_offset=lambda: None) == 15
        asked: list[int] = []
        # Not asked when nothing would move anyway.
        assert log.advance_log_start(3, protected_from_offset=lambda: asked.append(1) or 0) == 15
        assert not asked
