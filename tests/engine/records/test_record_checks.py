"""Offset deltas must climb, refusals say which record and where to skip to, and
decompression stops at its cap without allocating what a frame declares."""

from __future__ import annotations

import tracemalloc

import pytest
import zstandard

from twinlog.engine.base.errors import CorruptBatchError, InvalidRecordError
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.records.batch_builder import encode_record
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.compression import CODEC_ZSTD, decompress
from twinlog.engine.records.record_decoder import decode_records


def header_of(record_count: int, last_offset_delta: int) -> BatchHeader:
    """The header of an uncompressed batch at offset 100 (its other fields play no part)."""
    return BatchHeader(
        base_offset=100,
        batch_length=0,
        partition_leader_epoch=-1,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=last_offset_delta,
        first_timestamp_ms=0,
        max_timestamp_ms=0,
        producer_id=-1,
        producer_generation=-1,
        base_sequence=-1,
        record_count=record_count,
    )


def section_of(*deltas: int) -> bytes:
    return b"".join(encode_record(delta, 0, b"k", b"v", None) for delta in deltas)


@pytest.mark.parametrize(
    ("deltas", "index"),
    [((0, 0, 0), 1), ((2, 1, 0), 1), ((0, 2, 1), 2), ((0, 1, 1), 2)],
    ids=["repeat", "backwards", "swapped", "last-repeats"],
)
def test_offset_deltas_that_do_not_climb_are_refused(deltas: tuple[int, ...], index: int) -> None:
    header = header_of(3, 2)
    with pytest.raises(InvalidRecordError, match=f"record {index} has offset delta") as refused:
        decode_records(section_of(*deltas), header)
    error = refused.value
    assert (error.offset, error.record_index, error.next_offset) == (100, index, 103)
    assert isinstance(error, CorruptBatchError)  # callers that catch the base still do


def test_offset_deltas_with_gaps_still_decode() -> None:
    # Compaction drops records and keeps the others' deltas.
    header = header_of(3, 5)
    assert decode_records(section_of(0, 2, 5), header).offsets == [100, 102, 105]
    header = header_of(1, 5)
    assert decode_records(section_of(3), header).offsets == [103]


def test_a_frame_declaring_more_than_the_cap_is_refused_before_decompressing() -> None:
    bomb = zstandard.ZstdCompressor(level=19).compress(bytes(64 * MEBIBYTE))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptBatchError, match="declares 67108864 bytes"):
            decompress(CODEC_ZSTD, bomb, 8 * MEBIBYTE)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < MEBIBYTE


def test_a_frame_holding_more_than_it_declares_stops_after_one_piece() -> None:
    frame = bytearray(
        zstandard.ZstdCompressor(write_content_size=False).compress(bytes(64 * MEBIBYTE))
    )
    frame[4] |= 0x20  # single segment: the window byte becomes a one-byte content size
    frame[5] = 100
    tracemalloc.start()
    try:
        with pytest.raises(CorruptBatchError):
            decompress(CODEC_ZSTD, bytes(frame))
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < 4 * MEBIBYTE


def test_decompress_round_trips_across_pieces() -> None:
    data = bytes(range(256)) * (5 * MEBIBYTE // 256 + 7)
    frame = zstandard.ZstdCompressor().compress(data)
    assert decompress(CODEC_ZSTD, frame) == data
    with pytest.raises(CorruptBatchError, match="holds"):
        decompress(CODEC_ZSTD, frame[:-9])


def test_values_checked_but_not_kept_are_still_refused_when_they_overrun() -> None:
    # The door of produce checks every value without copying it out (keep_values=False).
    section = section_of(0, 1)
    checked = decode_records(section, header_of(2, 1), keep_values=False)
    assert checked.values == [None, None] and checked.keys == [b"k", b"k"]
    assert decode_records(section, header_of(2, 1)).values == [b"v", b"v"]
    first = encode_record(0, 0, b"k", b"v", None)
    # The first record's value length says 9 bytes where 1 byte and the header count remain.
    overrun = bytearray(first)
    overrun[first.index(b"v") - 1] = 18  # zig-zag varint of 9
    with pytest.raises(InvalidRecordError, match="record 0 has value length 9"):
        decode_records(bytes(overrun), header_of(1, 0), keep_values=False)
