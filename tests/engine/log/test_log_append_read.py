"""Appending and reading: dense offsets, whole batches, max_bytes, ranges, bad input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_support import batch_values, headers_of, make_batch, read_all, segment_files

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    LogClosedError,
    OffsetOutOfRangeError,
)
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_format import CRC_OFFSET, HEADER_BYTES

SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=256)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[DataLog]:
    data_log = DataLog.open(tmp_path / "log", SMALL)
    yield data_log
    data_log.close()


def test_new_log_is_empty(log: DataLog) -> None:
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.read(0, 100) == b""
    assert log.last_batch_header() is None
    assert list(log.iter_headers(0)) == []
    assert log.size_bytes() == 0
    assert [p.name for p in segment_files(log.directory)] == ["00000000000000000000.log"]


def test_offsets_are_dense_and_increasing(log: DataLog) -> None:
    counts = [1, 5, 2, 7, 1, 3]
    base_offsets = [
        log.append_as_leader(make_batch(count, tag=i)) for i, count in enumerate(counts)
    ]
    assert base_offsets == [0, 1, 6, 8, 15, 16]
    assert log.log_end_offset == sum(counts)
    data = read_all(log)
    assert [h.base_offset for h in headers_of(data)] == base_offsets
    assert [h.record_count for h in headers_of(data)] == counts
    log.check()


def test_append_patches_only_the_base_offset_and_leader_epoch(log: DataLog) -> None:
    batch = make_batch(3)
    assert batch[12:16] == b"\xff\xff\xff\xff"  # a producer writes no epoch (-1)
    log.append_as_leader(make_batch(2))
    log.append_as_leader(batch)
    stored = log.read(2, 1 << 20)
    assert stored[8:12] == batch[8:12]  # the length
    assert stored[16:] == batch[16:]  # the rest, CRC included, is the producer's bytes
    assert int.from_bytes(stored[:8], "big") == 2
    assert int.from_bytes(stored[12:16], "big", signed=True) == log.leader_epoch == 0


def test_read_starts_at_the_batch_holding_the_offset(log: DataLog) -> None:
    for tag in range(4):
        log.append_as_leader(make_batch(5, tag=tag))  # offsets 0-4, 5-9, 10-14, 15-19
    for offset in range(20):
        first = headers_of(log.read(offset, 1))[0]
        assert first.base_offset <= offset <= first.last_offset


def test_max_bytes_limits_to_whole_batches_but_returns_at_least_one(log: DataLog) -> None:
    sizes = [len(make_batch(3, tag=i)) for i in range(6)]
    for tag in range(6):
        log.append_as_leader(make_batch(3, tag=tag))
    assert len(headers_of(log.read(0, 0))) == 1  # one whole batch even with no budget
    assert len(log.read(0, sizes[0] - 1)) == sizes[0]
    assert len(headers_of(log.read(0, sizes[0] + sizes[1]))) == 2
    assert len(headers_of(log.read(0, sizes[0] + sizes[1] + 5))) == 2
    assert len(headers_of(log.read(3, 10 * sizes[0]))) == 5


def test_a_batch_larger_than_max_bytes_comes_whole(log: DataLog) -> None:
    big = make_batch(20, value_bytes=50)
    log.append_as_leader(big)
    assert log.read(7, 100) == log.read(0, len(big))
    assert len(log.read(7, 100)) == len(big)


def test_out_of_range_offsets(log: DataLog) -> None:
    log.append_as_leader(make_batch(4))
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 5 is out of range.*0\.\.4") as caught:
        log.read(5, 100)
    assert (caught.value.log_start_offset, caught.value.log_end_offset) == (0, 4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.iter_headers(9)
    assert log.read(4, 100) == b""


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=30),
    value_bytes=st.integers(1, 120),
    max_bytes=st.integers(0, 3000),
    data=st.data(),
)
def test_read_matches_a_model(
    tmp_path: Path, counts: list[int], value_bytes: int, max_bytes: int, data: st.DataObject
) -> None:
    directory = tmp_path / f"log-{len(list(tmp_path.iterdir()))}"
    batches = [make_batch(count, value_bytes, tag=tag) for tag, count in enumerate(counts)]
    with DataLog.open(directory, SMALL) as log:
        log.append_all_as_leader(batches)
        log.check()
        starts = [sum(counts[:i]) for i in range(len(counts))]
        offset = data.draw(st.integers(0, sum(counts) - 1), label="offset")
        first = max(i for i, start in enumerate(starts) if start <= offset)
        result = headers_of(log.read(offset, max_bytes))
        assert result[0].base_offset == starts[first]
        # Whole batches, contiguous, within one segment, within max_bytes unless just one.
        assert [h.base_offset for h in result] == starts[first : first + len(result)]
        assert len(result) == 1 or sum(h.size_bytes for h in result) <= max_bytes
        # Greedy: the next batch was left out only if it did not fit or starts a segment.
        after = first + len(result)
        segment_bases = {int(path.stem) for path in segment_files(directory)}
        if after < len(batches):
            fits = sum(h.size_bytes for h in result) + len(batches[after]) <= max_bytes
            assert not fits or starts[after] in segment_bases
        assert batch_values(read_all(log)) == batch_values(b"".join(batches))


def test_iter_headers_and_last_batch_header(log: DataLog) -> None:
    for tag in range(40):
        log.append_as_leader(make_batch(2, value_bytes=40, tag=tag))
    assert len(segment_files(log.directory)) > 1
    headers = list(log.iter_headers(33))
    assert headers[0].base_offset == 32 and headers[-1].base_offset == 78
    assert [h.base_offset for h in headers] == list(range(32, 80, 2))
    last = log.last_batch_header()
    assert last is not None and last == headers[-1]


def test_corrupt_batch_is_refused_and_nothing_is_written(log: DataLog) -> None:
    log.append_as_leader(make_batch(1))
    bad = bytearray(make_batch(2))
    bad[HEADER_BYTES + 2] ^= 0x40
    with pytest.raises(
        CorruptBatchError, match=r"CRC-32C mismatch: header says 0x[0-9a-f]{8}, bytes give"
    ):
        log.append_as_leader(bytes(bad))
    bad_crc = bytearray(make_batch(2))
    bad_crc[CRC_OFFSET] ^= 1
    with pytest.raises(CorruptBatchError):
        log.append_as_leader(bytes(bad_crc))
    with pytest.raises(CorruptBatchError, match="only 20 present"):
        log.append_as_leader(make_batch(2)[:20])
    assert log.log_end_offset == 1
    assert log.size_bytes() == len(make_batch(1))
    log.check()


def test_trailing_bytes_after_a_batch_are_refused(log: DataLog) -> None:
    with pytest.raises(CorruptBatchError, match=r"buffer holds .* bytes, its length field says"):
        log.append_as_leader(make_batch(1) + b"\x00")
    with pytest.raises(CorruptBatchError):
        log.append_all_as_leader([make_batch(1) + make_batch(1)])
    assert log.log_end_offset == 0


def test_a_batch_in_pieces_is_written_as_the_same_batch_whole(log: DataLog) -> None:
    first, second = make_batch(3, tag=1), make_batch(2, tag=2)
    assert log.append_as_leader(first) == 0
    pieces = [second[: HEADER_BYTES + 5], memoryview(second)[HEADER_BYTES + 5 : -7], second[-7:]]
    assert log.append_as_leader(pieces, validate=False) == 3
    assert log.log_end_offset == 5
    stored = log.read(3, 10_000)
    assert stored[:8] == (3).to_bytes(8, "big")  # its offsets given by the log
    assert stored[8:12] == second[8:12] and stored[16:] == second[16:]  # the rest as given
    assert batch_values(stored) == batch_values(second)
    log.check()  # the CRC, not checked on the way in, holds


def test_a_batch_in_any_one_buffer_is_a_whole_batch_not_pieces(log: DataLog) -> None:
    batch = make_batch(2)
    assert log.append_as_leader(bytearray(batch)) == 0
    assert log.append_as_leader(memoryview(batch)) == 2
    bad = bytearray(batch)
    bad[CRC_OFFSET] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):  # checked: it is not a caller's pieces
        log.append_as_leader(bad)
    assert log.log_end_offset == 4


def test_a_batch_in_pieces_is_checked_like_a_whole_one_and_nothing_is_written(
    log: DataLog,
) -> None:
    batch = make_batch(2)
    with pytest.raises(CorruptBatchError, match="first piece of a batch holds 20 bytes"):
        log.append_as_leader([batch[:20], batch[20:]], validate=False)
    with pytest.raises(CorruptBatchError, match=r"pieces hold .* bytes, its length field says"):
        log.append_as_leader([batch, b"\x00"], validate=False)
    with pytest.raises(CorruptBatchError, match=r"pieces hold .* bytes, its length field says"):
        log.append_as_leader([batch[:-1]], validate=False)
    bad_magic = bytearray(batch)
    bad_magic[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        log.append_as_leader([bytes(bad_magic)], validate=False)
    assert log.log_end_offset == 0 and log.size_bytes() == 0


def test_a_batch_in_pieces_is_refused_unless_its_caller_vouches_for_the_crc(log: DataLog) -> None:
    batch = make_batch(2)
    with pytest.raises(ValueError, match="validate=False"):
        log.append_as_leader([batch[:70], batch[70:]])
    assert log.log_end_offset == 0 and log.size_bytes() == 0


def test_too_large_batch_names_the_limit_and_how_to_raise_it(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, LogConfig(batch_bytes_max=200)) as log:
        with pytest.raises(
            BatchTooLargeError, match=r"over its topic's limit of 200 bytes.*max.message.bytes"
        ):
            log.append_as_leader(make_batch(10, value_bytes=50))
        assert log.log_end_offset == 0 and log.size_bytes() == 0


def test_append_all_as_leader_streams_from_a_generator(log: DataLog) -> None:
    produced = []

    def batches() -> Iterator[bytes]:
        for tag in range(50):
            batch = make_batch(2, value_bytes=30, tag=tag)
            produced.append(batch)
            yield batch

    first, next_offset = log.append_all_as_leader(batches())
    assert (first, next_offset) == (0, 100)
    assert len(segment_files(log.directory)) > 1  # rolled in between
    assert batch_values(read_all(log)) == batch_values(b"".join(produced))
    log.check()


def test_append_all_as_leader_rolls_back_everything_on_a_bad_batch(log: DataLog) -> None:
    log.append_as_leader(make_batch(1))
    before = log.size_bytes()
    bad = bytearray(make_batch(1))
    bad[-1] ^= 1
    batches = [make_batch(3, value_bytes=100, tag=t) for t in range(20)] + [bytes(bad)]
    with pytest.raises(CorruptBatchError):
        log.append_all_as_leader(batches)
    assert (log.log_end_offset, log.size_bytes()) == (1, before)
    assert len(segment_files(log.directory)) == 1
    log.check()
    assert log.append_as_leader(make_batch(1)) == 1


def test_append_all_as_leader_rolls_back_when_the_iterable_fails(log: DataLog) -> None:
    def failing() -> Iterator[bytes]:
        yield make_batch(2)
        raise RuntimeError("journal read failed")

    with pytest.raises(RuntimeError, match="journal read failed"):
        log.append_all_as_leader(failing())
    assert log.log_end_offset == 0
    log.check()


def test_append_all_as_leader_without_validation_still_checks_structure(log: DataLog) -> None:
    bad_crc = bytearray(make_batch(1))
    bad_crc[-1] ^= 1
    assert log.append_all_as_leader([bytes(bad_crc)], validate=False) == (
        0,
        1,
    )  # caller vouched for CRCs
    with pytest.raises(CorruptBatchError, match="batch length field is 0"):
        log.append_all_as_leader([b"\x00" * 70], validate=False)
    no_magic = bytearray(make_batch(1))
    no_magic[8 + 4 + 4] = 7  # after offset, length and partition leader epoch
    with pytest.raises(CorruptBatchError, match="magic byte is 7"):
        log.append_all_as_leader([bytes(no_magic)], validate=False)
    assert log.log_end_offset == 1


def test_memoryview_input(log: DataLog) -> None:
    batch = make_batch(3)
    assert log.append_as_leader(memoryview(batch)) == 0
    assert log.append_all_as_leader([memoryview(batch), memoryview(bytearray(batch))]) == (3, 9)


def test_closed_log_refuses_calls(tmp_path: Path) -> None:
    log = DataLog.open(tmp_path)
    log.append_as_leader(make_batch(1))
    log.close()
    log.close()  # idempotent
    for call in (
        lambda: log.append_as_leader(make_batch(1)),
        lambda: log.read(0, 10),
        lambda: log.log_end_offset,
        log.flush,
        lambda: log.iter_headers(0),
        lambda: log.truncate_to(0),
        log.apply_retention,
    ):
        with pytest.raises(LogClosedError, match="closed; open it again"):
            call()


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    batches = [make_batch(3, value_bytes=60, tag=t) for t in range(30)]
    with DataLog.open(tmp_path, SMALL) as log:
        log.append_all_as_leader(batches[:20])
        for batch in batches[20:]:
            log.append_as_leader(batch)
    with DataLog.open(tmp_path, SMALL) as log:
        assert log.log_end_offset == 90
        assert batch_values(read_all(log)) == batch_values(b"".join(batches))
        assert log.append_as_leader(make_batch(1)) == 90
        log.check()
