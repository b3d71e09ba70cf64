"""Segments: roll by size and age, the sparse indexes (rebuild, layout), offset_for_timestamp."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_support import (
    TIMESTAMP_MS,
    batch_positions,
    batch_values,
    make_batch,
    read_all,
    segment_files,
)

from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.segment_index import OFFSET_ENTRY, TIME_ENTRY
from twinlog.engine.records.batch_builder import RecordBatchBuilder

HOUR_MS = 3600 * 1000


def test_segment_files_are_named_by_base_offset(tmp_path: Path) -> None:
    batch = make_batch(5, value_bytes=20)
    config = LogConfig(segment_bytes=3 * len(batch))
    with DataLog.open(tmp_path, config) as log:
        for tag in range(7):
            log.append_as_leader(make_batch(5, value_bytes=20, tag=tag))
        names = [path.name for path in segment_files(tmp_path)]
        assert names == [
            "00000000000000000000.log",
            "00000000000000000015.log",
            "00000000000000000030.log",
        ]
        assert {p.name for p in tmp_path.iterdir()} >= {
            "00000000000000000015.index",
            "00000000000000000015.timeindex",
            "recovery-point",
        }
        log.check()


def test_roll_by_size_keeps_segments_within_segment_bytes(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000)
    with DataLog.open(tmp_path, config) as log:
        for tag in range(60):
            log.append_as_leader(make_batch(1 + tag % 4, value_bytes=30, tag=tag))
        sizes = [path.stat().st_size for path in segment_files(tmp_path)]
        assert len(sizes) > 5
        assert all(size <= 1000 for size in sizes)
        assert all(size > 1000 - len(make_batch(4, value_bytes=30)) for size in sizes[:-1])
        log.check()


def test_a_batch_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=200)
    big = make_batch(10, value_bytes=50)
    with DataLog.open(tmp_path, config) as log:
        log.append_as_leader(make_batch(1))
        log.append_as_leader(big)
        log.append_as_leader(make_batch(1))
        sizes = [path.stat().st_size for path in segment_files(tmp_path)]
        assert sizes == [len(make_batch(1)), len(big), len(make_batch(1))]
        stored = log.read(1, 10)
        assert stored[8:12] == big[8:12] and stored[16:] == big[16:]  # offset, epoch stamped


def test_roll_by_age_uses_batch_timestamps(tmp_path: Path) -> None:
    config = LogConfig(segment_ms=HOUR_MS)
    with DataLog.open(tmp_path, config) as log:
        log.append_as_leader(make_batch(1, timestamp_ms=TIMESTAMP_MS))
        log.append_as_leader(
            make_batch(1, timestamp_ms=TIMESTAMP_MS + HOUR_MS)
        )  # exactly the limit: stays
        assert len(segment_files(tmp_path)) == 1
        log.append_as_leader(
            make_batch(1, timestamp_ms=TIMESTAMP_MS + HOUR_MS + 1)
        )  # past it: rolls
        assert [p.name for p in segment_files(tmp_path)][-1] == "00000000000000000002.log"
        log.append_as_leader(make_batch(1, timestamp_ms=TIMESTAMP_MS + HOUR_MS + 2))
        assert len(segment_files(tmp_path)) == 2
    with DataLog.open(tmp_path, config) as log:  # the basis survives a reopen
        log.append_as_leader(make_batch(1, timestamp_ms=TIMESTAMP_MS + 2 * HOUR_MS + 2))
        assert len(segment_files(tmp_path)) == 3


def _index_entries(path: Path, entry: struct.Struct) -> list[tuple[int, ...]]:
    return list(entry.iter_unpack(path.read_bytes()))


def test_index_entries_follow_the_interval_rule(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=300)
    batches = [
        make_batch(2, value_bytes=25, timestamp_ms=TIMESTAMP_MS + (7 * t) % 50, tag=t)
        for t in range(40)
    ]
    with DataLog.open(tmp_path, config) as log:
        log.append_all_as_leader(batches)
    segment = segment_files(tmp_path)[0]
    entries = _index_entries(segment.with_suffix(".index"), OFFSET_ENTRY)
    time_entries = _index_entries(segment.with_suffix(".timeindex"), TIME_ENTRY)
    expected, last_position, max_timestamp = [], 0, -1
    expected_time = []
    for number, (position, _) in enumerate(batch_positions(segment)):
        max_timestamp = max(max_timestamp, TIMESTAMP_MS + (7 * number) % 50)
        if position - last_position >= 300:
            expected.append((2 * number, position))
            expected_time.append((max_timestamp, 2 * number))
            last_position = position
    assert entries == expected and len(entries) > 5
    assert time_entries == expected_time


def _damage_remove(path: Path) -> None:
    path.unlink()


def _damage_truncate_odd(path: Path) -> None:
    os.truncate(path, max(path.stat().st_size - 3, 0))


def _damage_garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size or 24))


def _damage_swap_entries(path: Path) -> None:
    data = path.read_bytes()
    width = 8 if path.suffix == ".index" else 12
    path.write_bytes(data[width : 2 * width] + data[:width] + data[2 * width :])


def _damage_point_elsewhere(path: Path) -> None:
    # Plausible entries (increasing) that point at the wrong batch: only the spot check sees it.
    if path.suffix == ".index":
        entries = _index_entries(path, OFFSET_ENTRY)
        shifted = [(offset + 1, position) for offset, position in entries]
        path.write_bytes(b"".join(OFFSET_ENTRY.pack(*entry) for entry in shifted))
        time_path = path.with_suffix(".timeindex")
        time_entries = _index_entries(time_path, TIME_ENTRY)
        time_path.write_bytes(
            b"".join(TIME_ENTRY.pack(ts, offset + 1) for ts, offset in time_entries)
        )


DAMAGES = [
    _damage_remove,
    _damage_truncate_odd,
    _damage_garbage,
    _damage_swap_entries,
    _damage_point_elsewhere,
]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda damage: damage.__name__[8:])
@pytest.mark.parametrize("which", ["sealed", "active"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_damaged_index_is_rebuilt_and_reads_stay_right(
    tmp_path: Path, damage: object, which: str, suffix: str
) -> None:
    config = LogConfig(segment_bytes=1500, index_interval_bytes=100)
    batches = [
        make_batch(3, value_bytes=20, timestamp_ms=TIMESTAMP_MS + t, tag=t) for t in range(45)
    ]
    with DataLog.open(tmp_path / "log", config) as log:
        log.append_all_as_leader(batches)
    pristine = {p.name: p.read_bytes() for p in (tmp_path / "log").iterdir()}
    segments = segment_files(tmp_path / "log")
    assert len(segments) >= 3
    target = (segments[0] if which == "sealed" else segments[-1]).with_suffix(suffix)
    if damage is _damage_point_elsewhere and suffix == ".timeindex":
        target = target.with_suffix(".index")
    damage(target)  # type: ignore[operator]
    if (damage is _damage_remove) or target.read_bytes() != pristine[target.name]:
        # Active segment: the log was closed cleanly, so its index is checked when it is
        # loaded on open. Sealed: on open (sizes) or on first use (contents).
        with DataLog.open(tmp_path / "log", config) as log:
            for offset in range(0, 135, 7):
                assert batch_values(log.read(offset, 1))[0] == f"{offset // 3}:0:".encode().ljust(
                    20, b"v"
                )
            assert log.offset_for_timestamp(TIMESTAMP_MS + 20) == 60
            assert batch_values(read_all(log)) == batch_values(b"".join(batches))
            log.check()
        rebuilt = {p.name: p.read_bytes() for p in (tmp_path / "log").iterdir()}
        assert rebuilt[target.name] == pristine[target.name]  # the rule gives the same bytes


def test_index_rebuild_is_reported_on_open(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    with DataLog.open(tmp_path, config) as log:
        for tag in range(40):
            log.append_as_leader(make_batch(2, tag=tag))
    sealed = segment_files(tmp_path)[1]
    sealed.with_suffix(".timeindex").unlink()
    with DataLog.open(tmp_path, config) as log:
        assert log.recovery_report.indexes_rebuilt == [str(sealed)]
        assert log.recovery_report.batches_checked > 0  # the rebuild validated that segment
        log.check()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    timestamps=st.lists(st.integers(0, 1000), min_size=1, max_size=40),
    probes=st.lists(st.integers(-5, 1005), min_size=1, max_size=10),
)
def test_offset_for_timestamp_matches_a_model(
    tmp_path: Path, timestamps: list[int], probes: list[int]
) -> None:
    directory = tmp_path / "log"
    shutil.rmtree(directory, ignore_errors=True)
    config = LogConfig(segment_bytes=600, index_interval_bytes=150, segment_ms=10**9)
    batches = [
        make_batch(2, timestamp_ms=TIMESTAMP_MS + ts, tag=n) for n, ts in enumerate(timestamps)
    ]
    with DataLog.open(directory, config) as log:
        log.append_all_as_leader(batches)
        for probe in probes:
            expected = next((2 * n for n, ts in enumerate(timestamps) if ts >= probe), None)
            assert log.offset_for_timestamp(TIMESTAMP_MS + probe) == expected, probe
            # and the found record's own timestamp (ListOffsets answers both)
            record = (
                None if expected is None else (expected, TIMESTAMP_MS + timestamps[expected // 2])
            )
            assert log.record_for_timestamp(TIMESTAMP_MS + probe) == record, probe
        largest = max(timestamps)  # the first batch holding it, its first record
        expected_max = (2 * timestamps.index(largest), TIMESTAMP_MS + largest)
        assert log.record_with_max_timestamp() == expected_max


def test_offset_for_timestamp_after_reopen_and_on_empty_log(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, LogConfig(segment_bytes=300)) as log:
        assert log.offset_for_timestamp(0) is None
        assert log.record_with_max_timestamp() is None
        for n in range(20):
            log.append_as_leader(make_batch(1, timestamp_ms=1000 * n))
    with DataLog.open(tmp_path, LogConfig(segment_bytes=300)) as log:
        assert log.offset_for_timestamp(0) == 0
        assert log.offset_for_timestamp(12_500) == 13
        assert log.offset_for_timestamp(19_000) == 19
        assert log.offset_for_timestamp(19_001) is None


def test_offset_for_timestamp_finds_the_record_inside_a_batch(tmp_path: Path) -> None:
    """Kafka's ListOffsets answers the first record at or after the time, not the start of
    the batch holding it (a reset by time would read the batch's older records again)."""
    builder = RecordBatchBuilder("none")
    for n in range(4):
        builder.append(b"%d" % n, timestamp_ms=TIMESTAMP_MS + 10 * n)
    with DataLog.open(tmp_path, LogConfig()) as log:
        log.append_as_leader(make_batch(1, timestamp_ms=TIMESTAMP_MS - 100))
        log.append_as_leader(builder.build())
        assert log.offset_for_timestamp(TIMESTAMP_MS + 15) == 3
        assert log.offset_for_timestamp(TIMESTAMP_MS + 30) == 4
        assert log.offset_for_timestamp(TIMESTAMP_MS - 50) == 1
        assert log.offset_for_timestamp(TIMESTAMP_MS + 31) is None


def test_size_bytes_is_the_segment_files_through_rolls_retention_and_truncation(
    tmp_path: Path,
) -> None:
    """``size_bytes`` keeps the whole segments' bytes from the last change of the list (it
    is asked at every append): it must follow rolls, deletions, cuts into an earlier
    segment and a start over, and equal what the files hold."""
    batch = make_batch(5, value_bytes=20)
    config = LogConfig(
        segment_bytes=3 * len(batch), retention_bytes=7 * len(batch), retention_ms=-1
    )

    def on_disk() -> int:
        return sum(path.stat().st_size for path in segment_files(tmp_path))

    with DataLog.open(tmp_path, config) as log:
        for tag in range(10):
            log.append_as_leader(make_batch(5, value_bytes=20, tag=tag))
            assert log.size_bytes() == on_disk(), tag
        assert len(segment_files(tmp_path)) == 4
        assert log.apply_retention() > 0
        assert log.size_bytes() == on_disk()
        log.truncate_to(log.log_start_offset + 5)  # into the first segment left
        assert len(segment_files(tmp_path)) == 1
        assert log.size_bytes() == on_disk() == len(batch)
        for tag in range(4):
            log.append_as_leader(make_batch(5, value_bytes=20, tag=tag))
            assert log.size_bytes() == on_disk(), tag
        log.truncate_fully_and_start_at(log.log_end_offset + 100)  # a follower starting over
        assert log.size_bytes() == on_disk() == 0
        log.append_as_leader(batch)
        assert log.size_bytes() == on_disk() == len(batch)
