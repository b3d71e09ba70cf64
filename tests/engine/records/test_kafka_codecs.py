"""gzip, snappy, lz4 and zstd sections as Kafka's clients write them: read back, held to
their limit in pieces (a bomb of any codec is refused before it is inflated, and holds
none of the decompression budget), and refused with a typed error naming the codec when
damaged."""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import zstandard
from kafka.codec import gzip_encode, lz4_encode, snappy_encode

from twinlog.engine.base.errors import BatchTooLargeError, CorruptBatchError
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.records.batch_format import (
    RECORDS_OFFSET,
    BatchHeader,
    pack_header,
    validate_batch,
)
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.compression import (
    CODEC_BY_NAME,
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    compress,
    decompress,
    decompressed_size,
    decompressed_size_declared,
)
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.records.produced_records import check_produced_records

COMPRESSED_CODECS = ["gzip", "snappy", "lz4", "zstd"]
BOMB_BYTES = 48 * MEBIBYTE
LIMIT_BYTES = 4 * MEBIBYTE


def _raw_snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def _sizeless_lz4(data: bytes) -> bytes:
    """As the Java client writes it: independent 64 KiB blocks, no content size."""
    return lz4.frame.compress(
        data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
    )


def _sizeless_zstd(data: bytes) -> bytes:
    """As librdkafka writes it: a frame without its content size."""
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


def _two_gzip_members(data: bytes) -> bytes:
    half = len(data) // 2
    return gzip_encode(data[:half]) + gzip_encode(data[half:])


# Each way a Kafka client may write a codec's section (and twinlog's own).
WRITERS: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "gzip-kafka-python": (CODEC_GZIP, gzip_encode),
    "gzip-two-members": (CODEC_GZIP, _two_gzip_members),
    "snappy-xerial": (CODEC_SNAPPY, snappy_encode),
    "snappy-raw": (CODEC_SNAPPY, _raw_snappy),
    "lz4-kafka-python": (CODEC_LZ4, lz4_encode),
    "lz4-without-size": (CODEC_LZ4, _sizeless_lz4),
    "zstd-without-size": (CODEC_ZSTD, _sizeless_zstd),
    **{
        f"{name}-twinlog": (CODEC_BY_NAME[name], lambda d, n=name: compress(CODEC_BY_NAME[n], d))
        for name in COMPRESSED_CODECS
    },
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_clients_section_reads_back_and_counts_exactly(writer: str) -> None:
    codec, encode = WRITERS[writer]
    data = bytes(range(256)) * 9_000 + b"tail"  # over 2 MiB: several pieces and blocks
    section = encode(data)
    assert bytes(decompress(codec, section)) == data
    assert decompressed_size(codec, section, len(data)) == len(data)
    assert decompressed_size(codec, section, len(data) - 1) == len(data)  # "more than"
    declared = decompressed_size_declared(codec, section)
    assert declared in (None, len(data))


def _bomb(codec: int) -> bytes:
    """``BOMB_BYTES`` of zeros, compressed: a few hundred KiB (snappy: 2 MiB)."""
    if codec == CODEC_GZIP:
        return gzip_encode(bytes(BOMB_BYTES))
    if codec == CODEC_LZ4:
        return _sizeless_lz4(bytes(BOMB_BYTES))
    if codec == CODEC_ZSTD:
        return _sizeless_zstd(bytes(BOMB_BYTES))
    return snappy_encode(bytes(BOMB_BYTES))


def _batch_around(codec: int, section: bytes) -> bytes:
    """A CRC-valid batch of one record whose records section is ``section``."""
    header = validate_batch(build_batch([b"x"], "none"))
    buffer = bytearray(RECORDS_OFFSET + len(section))
    buffer[RECORDS_OFFSET:] = section
    pack_header(
        buffer,
        base_offset=0,
        attributes=codec,
        last_offset_delta=0,
        first_timestamp_ms=header.first_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=-1,
        producer_generation=-1,
        base_sequence=-1,
        record_count=1,
    )
    return bytes(buffer)


def _check(batch: bytes, budget: DecompressionBudget, header: BatchHeader | None = None) -> bool:
    return check_produced_records(
        batch,
        header or validate_batch(batch),
        topic="t",
        partition=0,
        records_max=1_000,
        decompressed_bytes_max=LIMIT_BYTES,
        budget=budget,
    )


@pytest.mark.parametrize("name", COMPRESSED_CODECS)
def test_a_bomb_of_each_codec_is_refused_at_the_door_before_it_is_inflated(name: str) -> None:
    codec = CODEC_BY_NAME[name]
    section = _bomb(codec)
    assert len(section) < BOMB_BYTES // 16  # snappy's blocks shrink zeros 21 times at most
    batch = _batch_around(codec, section)
    budget = DecompressionBudget(64 * MEBIBYTE)
    header = validate_batch(batch)  # the CRC check reads the batch in pieces of its own
    tracemalloc.start()
    try:
        with pytest.raises(BatchTooLargeError, match="batch_decompressed_bytes_max") as refused:
            _check(batch, budget, header)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert name in str(refused.value) and "send smaller batches" in str(refused.value)
    assert budget.peak_reserved_bytes == 0  # counted or declared, never held
    # What the check held beyond the batch: one small piece, not the limit, not the bomb.
    assert peak_bytes < MEBIBYTE, peak_bytes


@pytest.mark.parametrize("name", COMPRESSED_CODECS)
def test_a_reader_stops_a_bomb_at_its_limit(name: str) -> None:
    codec = CODEC_BY_NAME[name]
    bomb = _bomb(codec)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptBatchError, match=f"{name} records section .*{LIMIT_BYTES}"):
            decompress(codec, bomb, LIMIT_BYTES)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The pieces up to the limit, the one that passed it and the codec's buffer for it.
    assert peak_bytes < LIMIT_BYTES + 3 * MEBIBYTE, peak_bytes


@pytest.mark.parametrize("name", COMPRESSED_CODECS)
def test_a_batch_within_the_limit_holds_exactly_its_size_of_the_budget(name: str) -> None:
    values = [bytes([n]) * 100_000 for n in range(10)]
    batch = build_batch(values, name)
    budget = DecompressionBudget(64 * MEBIBYTE)
    assert _check(batch, budget) is False  # checked; the records have no keys
    section = memoryview(batch)[RECORDS_OFFSET:]
    inflated = len(bytes(decompress(CODEC_BY_NAME[name], section)))
    assert budget.peak_reserved_bytes == inflated > 1_000_000
    assert budget.reserved_bytes == 0


def _lying_lz4() -> bytes:
    """A frame whose header declares 100 bytes and whose blocks hold 1 MiB: the header of
    an honest 100-byte frame, then the blocks of a size-less 1 MiB one (same block flags)."""
    small = lz4.frame.compress(bytes(100), block_linked=False, store_size=True)
    large = _sizeless_lz4(bytes(MEBIBYTE))
    return small[:15] + large[7:]  # magic, FLG, BD, size, checksum | magic, FLG, BD, checksum


DAMAGED: dict[str, tuple[int, bytes]] = {
    "gzip-garbage": (CODEC_GZIP, b"\x1f\x8b\x08\x00garbage-garbage-garbage"),
    "gzip-cut": (CODEC_GZIP, gzip_encode(bytes(range(256)) * 100)[:-30]),
    "gzip-trailing-garbage": (CODEC_GZIP, gzip_encode(b"abc") + b"not gzip"),
    "snappy-garbage": (CODEC_SNAPPY, b"\xff\xff\xff\xff\xff\xff\xff"),
    "snappy-cut-xerial-block": (CODEC_SNAPPY, snappy_encode(bytes(range(256)) * 100)[:-5]),
    "snappy-cut-xerial-header": (CODEC_SNAPPY, snappy_encode(b"abc")[:12]),
    "snappy-block-lies": (CODEC_SNAPPY, b"\x64" + _raw_snappy(b"abc")[1:]),
    "lz4-garbage": (CODEC_LZ4, b"garbage-garbage-garbage"),
    "lz4-cut": (CODEC_LZ4, _sizeless_lz4(bytes(range(256)) * 1000)[:-40]),
    "lz4-trailing-bytes": (CODEC_LZ4, lz4_encode(b"abc") + b"xyz"),
    "zstd-garbage": (CODEC_ZSTD, b"\x28\xb5\x2f\xfd garbage-garbage"),
    "zstd-cut": (CODEC_ZSTD, _sizeless_zstd(bytes(range(256)) * 1000)[:-20]),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_section_of_each_codec_is_a_typed_error_naming_it(case: str) -> None:
    codec, section = DAMAGED[case]
    name = case.split("-")[0]
    with pytest.raises(CorruptBatchError, match=name):
        decompress(codec, section)
    batch = _batch_around(codec, section)
    with pytest.raises(CorruptBatchError, match=name):
        _check(batch, DecompressionBudget(64 * MEBIBYTE))
    with pytest.raises(CorruptBatchError, match=name):
        list(RecordBatch(batch).records())


def test_an_lz4_frame_holding_more_than_it_declares_is_refused_after_one_piece() -> None:
    with pytest.raises(CorruptBatchError, match="lz4 records section declares 100 bytes"):
        decompress(CODEC_LZ4, _lying_lz4())


def test_gzip_levels_and_zlib_streams_are_what_kafka_reads() -> None:
    # A zlib (not gzip) stream is not Kafka's gzip: refused, not guessed at.
    with pytest.raises(CorruptBatchError, match="gzip records section does not decompress"):
        decompress(CODEC_GZIP, zlib.compress(b"abc"))
