"""Recovery on open: torn tails are cut (and kept aside), corruption in the middle is refused.

Every corruption case goes through ONE helper, ``check_recovery(corruptor,
expected)``, with a one-line corruptor (etcd's repair tests are the model).
The pristine log is a crashed one: 4 batches written and cleanly closed (so
the recovery point sits after them), then 8 more appended and the process
"killed" (the directory copied while the log was open). Open must scan those 8
batches and nothing before them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_support import batch_positions, batch_values, flip_bit, make_batch, read_all

from twinlog.engine.base.errors import CorruptLogError
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.checkpoints import read_recovery_point
from twinlog.engine.records.batch_builder import RecordBatchBuilder, build_batch
from twinlog.engine.records.batch_format import (
    MAGIC_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
)
from twinlog.engine.records.batch_reader import RecordBatch

CONFIG = LogConfig(index_interval_bytes=150)
CLEAN_BATCHES = 4
CRASHED_BATCHES = 8
SEGMENT_NAME = "00000000000000000000.log"

Corruptor = Callable[[Path], None]


@dataclass(frozen=True)
class Pristine:
    directory: Path
    batches: list[bytes]
    positions: list[tuple[int, int]]  # (position, size) of each batch in the segment
    recovery_position: int

    @property
    def segment(self) -> Path:
        return self.directory / SEGMENT_NAME

    def start_of(self, batch: int) -> int:
        return self.positions[batch][0]

    def end_of(self, batch: int) -> int:
        return self.positions[batch][0] + self.positions[batch][1]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    directory = tmp_path_factory.mktemp("pristine") / "log"
    batches = [
        make_batch(1 + n % 3, value_bytes=20, tag=n) for n in range(CLEAN_BATCHES + CRASHED_BATCHES)
    ]
    with DataLog.open(directory, CONFIG) as log:
        log.append_all_as_leader(batches[:CLEAN_BATCHES])
    log = DataLog.open(directory, CONFIG)
    for batch in batches[CLEAN_BATCHES:]:
        log.append_as_leader(batch)
    crashed = directory.parent / "crashed"
    shutil.copytree(directory, crashed)  # what a kill -9 leaves: every write is in the files
    log.close()
    point = read_recovery_point(crashed)
    assert point is not None
    positions = batch_positions(crashed / SEGMENT_NAME)
    assert point.position == positions[CLEAN_BATCHES][0]
    return Pristine(crashed, batches, positions, point.position)


@dataclass(frozen=True)
class Expected:
    surviving_batches: int  # batches readable after open, from the first
    cut_position: int | None = None  # where a torn tail was cut (None: nothing cut)
    error_position: int | None = None  # CorruptLogError at this position of the segment


def check_recovery(pristine: Pristine, corruptor: Corruptor, expected: Expected) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "log"
        shutil.copytree(pristine.directory, directory)
        segment = directory / SEGMENT_NAME
        corruptor(segment)
        damaged = segment.read_bytes()
        if expected.error_position is not None:
            with pytest.raises(CorruptLogError, match="corruption in the middle") as caught:
                DataLog.open(directory, CONFIG)
            assert (caught.value.path, caught.value.position) == (
                str(segment),
                expected.error_position,
            )
            assert segment.read_bytes() == damaged  # refused, not repaired
            return
        with DataLog.open(directory, CONFIG) as log:
            report = log.recovery_report
            assert report.batches_checked >= expected.surviving_batches - CLEAN_BATCHES
            if expected.cut_position is None:
                assert (report.bytes_truncated, report.truncated_at) == (0, None)
            else:
                assert report.truncated_at == (str(segment), expected.cut_position)
                assert report.bytes_truncated == len(damaged) - expected.cut_position
                assert report.corrupt_copy is not None
                assert (
                    Path(report.corrupt_copy).name
                    == f"{SEGMENT_NAME}.{expected.cut_position}.corrupt"
                )
                assert Path(report.corrupt_copy).read_bytes() == damaged[expected.cut_position :]
            survivors = pristine.batches[: expected.surviving_batches]
            assert batch_values(read_all(log)) == batch_values(b"".join(survivors))
            assert log.log_end_offset == sum(len(RecordBatch(b)) for b in survivors)
            log.check()
            log.append_as_leader(
                make_batch(1, tag=99)
            )  # the log goes on where the good batches end
        with DataLog.open(directory, CONFIG) as log:  # and a second open finds nothing to do
            assert log.recovery_report.bytes_truncated == 0
            assert log.recovery_report.batches_checked == 0


# --- one-line corruptors ----------------------------------------------------------------


def truncate_at(position: int) -> Corruptor:
    return lambda path: os.truncate(path, position)


def flip(position: int, bit: int) -> Corruptor:
    return lambda path: flip_bit(path, position, bit)


def zero_range(start: int, length: int) -> Corruptor:
    def corrupt(path: Path) -> None:
        with open(path, "r+b") as file:
            file.seek(start)
            file.write(bytes(length))

    return corrupt


def append_garbage(data: bytes) -> Corruptor:
    def corrupt(path: Path) -> None:
        with open(path, "ab") as file:
            file.write(data)

    return corrupt


def nothing(path: Path) -> None:
    pass


LAST = CLEAN_BATCHES + CRASHED_BATCHES - 1
# The partition leader epoch lies outside the CRC, as in Kafka (the leader stamps it without
# re-hashing), so no check of the batch can see a flipped bit in it: those bytes are skipped.
UNCHECKED_BYTES = range(PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET)


def checked_position(pristine: Pristine, batch: int, data: st.DataObject) -> int:
    """A position in ``batch`` whose bytes a check of the batch covers."""
    start = pristine.start_of(batch)
    return data.draw(
        st.integers(start, pristine.end_of(batch) - 1).filter(
            lambda position: position - start not in UNCHECKED_BYTES
        ),
        "position",
    )


# --- the cases ------------------------------------------------------------------------------


def test_a_crashed_log_recovers_whole(pristine: Pristine) -> None:
    check_recovery(pristine, nothing, Expected(LAST + 1))


@pytest.mark.slow
def test_torn_tail_at_every_byte_of_the_last_batch(pristine: Pristine) -> None:
    last_start = pristine.start_of(LAST)
    check_recovery(pristine, truncate_at(last_start), Expected(LAST))  # a clean cut: nothing torn
    for cut in range(last_start + 1, pristine.end_of(LAST)):
        check_recovery(pristine, truncate_at(cut), Expected(LAST, cut_position=last_start))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_flipped_bit_anywhere_in_the_last_batch_cuts_it(
    pristine: Pristine, data: st.DataObject
) -> None:
    position = checked_position(pristine, LAST, data)
    bit = data.draw(st.integers(0, 7), "bit")
    check_recovery(
        pristine, flip(position, bit), Expected(LAST, cut_position=pristine.start_of(LAST))
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_flipped_bit_in_a_middle_batch_is_refused(
    pristine: Pristine, data: st.DataObject
) -> None:
    batch = data.draw(st.integers(CLEAN_BATCHES, LAST - 1), "batch")
    position = checked_position(pristine, batch, data)
    bit = data.draw(st.integers(0, 7), "bit")
    check_recovery(
        pristine, flip(position, bit), Expected(batch, error_position=pristine.start_of(batch))
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_zeroed_range_in_the_middle_is_refused(pristine: Pristine, data: st.DataObject) -> None:
    start = data.draw(st.integers(pristine.recovery_position, pristine.start_of(LAST) - 1), "start")
    length = data.draw(st.integers(1, pristine.start_of(LAST) - start), "length")
    original = pristine.segment.read_bytes()
    unchecked = {
        batch_start + offset for batch_start, _ in pristine.positions for offset in UNCHECKED_BYTES
    }
    changed = [p for p in range(start, start + length) if original[p] != 0 and p not in unchecked]
    if not changed:
        expected = Expected(LAST + 1)  # the range was zero already: nothing to find
    else:
        batch = next(n for n, (p, size) in enumerate(pristine.positions) if p + size > changed[0])
        expected = Expected(batch, error_position=pristine.start_of(batch))
    check_recovery(pristine, zero_range(start, length), expected)


def test_zeroes_to_the_end_are_a_torn_tail(pristine: Pristine) -> None:
    start = pristine.start_of(LAST - 2) + 30
    length = pristine.end_of(LAST) - start
    check_recovery(
        pristine,
        zero_range(start, length),
        Expected(LAST - 2, cut_position=pristine.start_of(LAST - 2)),
    )


@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 100, b"\xff" * 13, b"\x02", os.urandom(300)],
    ids=["zeros", "ones", "one-byte", "random"],
)
def test_garbage_after_the_last_batch_is_cut(pristine: Pristine, garbage: bytes) -> None:
    check_recovery(
        pristine, append_garbage(garbage), Expected(LAST + 1, cut_position=pristine.end_of(LAST))
    )


def test_a_copy_of_a_batch_with_a_stale_offset_after_the_end_is_cut(pristine: Pristine) -> None:
    # A valid batch whose base offset goes backwards is not "data after the bad spot".
    stale = pristine.segment.read_bytes()[: pristine.end_of(0)]
    check_recovery(
        pristine,
        append_garbage(b"\x00" * 20 + stale),
        Expected(LAST + 1, cut_position=pristine.end_of(LAST)),
    )


def test_a_middle_batch_with_its_offset_changed_is_refused(pristine: Pristine) -> None:
    batch = CLEAN_BATCHES + 2
    check_recovery(
        pristine,
        flip(pristine.start_of(batch) + 7, 3),
        Expected(batch, error_position=pristine.start_of(batch)),
    )


@pytest.mark.parametrize("nested_base_offset", [0, 3, 1000])
def test_a_torn_batch_holding_a_batch_in_a_record_is_cut_not_refused(
    tmp_path: Path, nested_base_offset: int
) -> None:
    # A mirroring application stores whole batches as record values. When such a
    # record's batch is torn, the batch inside it must not pass for "valid data after
    # the bad spot", whatever base offset it carries.
    with DataLog.open(tmp_path, CONFIG) as log:
        for tag in range(3):
            log.append_as_leader(make_batch(tag=tag))
        nested = bytearray(make_batch(value_bytes=20, tag=9))
        nested[:8] = nested_base_offset.to_bytes(8, "big")
        builder = RecordBatchBuilder("none")
        builder.append(bytes(nested) + b"tail" * 50, timestamp_ms=1)
        log.append_as_leader(builder.build())
    segment = tmp_path / SEGMENT_NAME
    torn_at = batch_positions(segment)[-1][0]
    os.truncate(segment, segment.stat().st_size - 100)  # the nested batch survives whole
    (tmp_path / "recovery-point").unlink()  # as after a crash: no checkpoint past the tail
    with DataLog.open(tmp_path, CONFIG) as log:
        assert log.recovery_report.truncated_at == (str(segment), torn_at)
        assert log.log_end_offset == 3
        log.check()


# --- recovery points and what is (not) rescanned ----------------------------------------------


def test_a_cleanly_closed_log_is_not_rescanned(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_all_as_leader(make_batch(2, tag=n) for n in range(50))
    with DataLog.open(tmp_path, CONFIG) as log:
        report = log.recovery_report
        assert (report.segments_checked, report.batches_checked) == (0, 0)
        assert report.recovery_point is not None
        assert log.log_end_offset == 100


def test_corruption_before_the_recovery_point_is_not_rescanned_but_caught_by_readers(
    pristine: Pristine, tmp_path: Path
) -> None:
    # The documented trade-off: bytes fsynced before the recovery point are trusted
    # on open (so open time does not grow with history); read checks them the first
    # time it serves them, and refuses a bad batch naming the file and position.
    directory = tmp_path / "log"
    shutil.copytree(pristine.directory, directory)
    flip_bit(directory / SEGMENT_NAME, pristine.start_of(1) + 40)
    with DataLog.open(directory, CONFIG) as log:
        assert log.recovery_report.batches_checked == CRASHED_BATCHES
        assert RecordBatch(log.read(0, 1)).header.base_offset == 0  # before it: served
        with pytest.raises(CorruptLogError, match="CRC") as caught:
            log.read(1, 1)
        assert caught.value.position == pristine.start_of(1)
        assert caught.value.path == str(directory / SEGMENT_NAME)


def test_without_a_recovery_point_everything_is_scanned(pristine: Pristine, tmp_path: Path) -> None:
    directory = tmp_path / "log"
    shutil.copytree(pristine.directory, directory)
    (directory / "recovery-point").unlink()
    flip_bit(directory / SEGMENT_NAME, pristine.start_of(1) + 40)
    with pytest.raises(CorruptLogError) as caught:
        DataLog.open(directory, CONFIG)
    assert caught.value.position == pristine.start_of(1)


@pytest.mark.parametrize(
    "checkpoint",
    [
        "garbage\n",
        "recovery-point v1\nsegment_base_offset 0\nposition 5\nnext_offset 0\n",
        "recovery-point v1\nsegment_base_offset 0\nposition {clean}\nnext_offset 7\n",
        "recovery-point v1\nsegment_base_offset 40\nposition 0\nnext_offset 40\n",
        "recovery-point v1\nsegment_base_offset 0\nposition 999999\nnext_offset 40\n",
    ],
    ids=["unparsable", "not-a-boundary", "wrong-next-offset", "missing-segment", "past-the-end"],
)
def test_a_wrong_recovery_point_never_cuts_good_batches(
    pristine: Pristine, tmp_path: Path, checkpoint: str
) -> None:
    directory = tmp_path / "log"
    shutil.copytree(pristine.directory, directory)
    (directory / "recovery-point").write_text(checkpoint.format(clean=pristine.recovery_position))
    with DataLog.open(directory, CONFIG) as log:
        assert log.recovery_report.bytes_truncated == 0
        assert batch_values(read_all(log)) == batch_values(b"".join(pristine.batches))
        log.check()


def test_recovery_point_advances_inside_a_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("twinlog.engine.log.segment_list.RECOVERY_POINT_INTERVAL_BYTES", 500)
    log = DataLog.open(tmp_path, CONFIG)
    for n in range(20):
        log.append_as_leader(make_batch(2, value_bytes=40, tag=n))
    point = read_recovery_point(tmp_path)
    assert point is not None and point.position >= 1000  # moved without a roll or a close
    crashed = tmp_path.parent / (tmp_path.name + "-crashed")
    shutil.copytree(tmp_path, crashed)
    log.close()
    with DataLog.open(crashed, CONFIG) as reopened:
        assert reopened.recovery_report.batches_checked < 20
        assert reopened.log_end_offset == 40
    shutil.rmtree(crashed)


def test_torn_tail_in_a_segment_followed_by_an_empty_one(tmp_path: Path) -> None:
    # A crash right after a roll created the next segment; the old one's tail is torn.
    config = LogConfig(segment_bytes=400)
    with DataLog.open(tmp_path, config) as log:
        for n in range(6):
            log.append_as_leader(make_batch(2, value_bytes=30, tag=n))
    segments = sorted(tmp_path.glob("*.log"))
    last = segments[-1]
    (tmp_path / "recovery-point").unlink()
    positions = batch_positions(last)
    os.truncate(last, positions[-1][0] + 10)
    empty = tmp_path / "00000000000000000999.log"
    empty.touch()
    with DataLog.open(tmp_path, config) as log:
        assert log.recovery_report.truncated_at == (str(last), positions[-1][0])
        assert log.recovery_report.segments_deleted == [str(empty)]
        assert not empty.exists()
        log.check()


def test_bad_batch_in_a_segment_before_others_is_refused(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400)
    with DataLog.open(tmp_path, config) as log:
        for n in range(12):
            log.append_as_leader(make_batch(2, value_bytes=30, tag=n))
    first = sorted(tmp_path.glob("*.log"))[0]
    (tmp_path / "recovery-point").unlink()
    os.truncate(first, first.stat().st_size - 5)  # a "torn tail", but data follows it
    with pytest.raises(CorruptLogError, match="later segments hold batches"):
        DataLog.open(tmp_path, config)


def test_a_missing_segment_in_the_middle_is_refused(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400)
    with DataLog.open(tmp_path, config) as log:
        for n in range(12):
            log.append_as_leader(make_batch(2, value_bytes=30, tag=n))
    segments = sorted(tmp_path.glob("*.log"))
    (tmp_path / "recovery-point").unlink()
    segments[1].unlink()
    with pytest.raises(CorruptLogError, match="a segment is missing or damaged"):
        DataLog.open(tmp_path, config)


def test_iter_headers_names_a_damaged_first_batch_of_a_later_segment(tmp_path: Path) -> None:
    # The walk into a later segment starts at position 0 from what the walk before
    # it learned, not from an index entry: damage there is the segment's, reported
    # as CorruptLogError like read() reports it, never as index damage.
    config = LogConfig(segment_bytes=500)
    with DataLog.open(tmp_path, config) as log:
        for _ in range(20):
            log.append_as_leader(build_batch([b"v" * 50], "none"))
    second = sorted(tmp_path.glob("*.log"))[1]
    with open(second, "r+b") as file:
        file.write(bytes(20))
    with DataLog.open(tmp_path, config) as log:
        assert log.recovery_report.segments_checked == 0  # before the recovery point
        with pytest.raises(CorruptLogError) as caught:
            list(log.iter_headers(0))
        assert (caught.value.path, caught.value.position) == (str(second), 0)
        assert second.name in str(caught.value) and "position 0" in str(caught.value)
        with pytest.raises(CorruptLogError) as caught_by_read:
            log.read(int(second.stem), 1000)
        assert (caught_by_read.value.path, caught_by_read.value.position) == (str(second), 0)


def test_leftover_files_are_tidied(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_as_leader(make_batch(1))
    (tmp_path / "recovery-point.tmp").write_text("half")
    (tmp_path / "00000000000000000777.index").write_bytes(b"")
    with DataLog.open(tmp_path, CONFIG) as log:
        assert log.log_end_offset == 1
    assert not (tmp_path / "recovery-point.tmp").exists()
    assert not (tmp_path / "00000000000000000777.index").exists()


def test_a_second_cut_at_the_same_position_keeps_the_first_copy(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, CONFIG) as log:
        log.append_as_leader(make_batch(1))
    segment = tmp_path / SEGMENT_NAME
    end = segment.stat().st_size
    for garbage in (b"first", b"second"):
        with open(segment, "ab") as file:
            file.write(garbage)
        with DataLog.open(tmp_path, CONFIG):
            pass
    assert (tmp_path / f"{SEGMENT_NAME}.{end}.corrupt").read_bytes() == b"first"
    assert (tmp_path / f"{SEGMENT_NAME}.{end}.1.corrupt").read_bytes() == b"second"
