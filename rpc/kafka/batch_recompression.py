"""Batches from Kafka clients that the log does not take as they are, compressed again.

The log stores records sections uncompressed or as one zstd frame that declares its
decompressed size (so a reader can refuse a "zip bomb" before allocating,
``engine/records/compression``). librdkafka writes zstd frames without that size, and
gzip is every Kafka client's oldest codec; such a batch is decompressed here (bounded by
``decompressed_bytes_max``) and compressed again as a zstd frame with its size, its
header otherwise unchanged (offsets, timestamps, producer id, epoch and sequence), its
CRC computed anew. The CRC the client sent is checked first, so a damaged batch is
refused, never repaired. snappy and lz4 are refused with UNSUPPORTED_COMPRESSION_TYPE.
"""

from __future__ import annotations

import zlib

import zstandard
from kafka.record.default_records import DefaultRecordBatch

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import (
    RECORDS_OFFSET,
    BatchHeader,
    compute_crc,
    pack_header,
    unpack_header,
)
from twinlog.engine.records.compression import CODEC_MASK, CODEC_ZSTD, compress

CODEC_NONE = DefaultRecordBatch.CODEC_NONE
CODEC_GZIP = DefaultRecordBatch.CODEC_GZIP
UNSUPPORTED_CODECS = {
    DefaultRecordBatch.CODEC_SNAPPY: "snappy",
    DefaultRecordBatch.CODEC_LZ4: "lz4",
}
GZIP_WINDOW_BITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate
READ_CHUNK_BYTES = 1 << 20


class UnsupportedCompressionError(Exception):
    """A codec twinlog does not read (the message names it and what to use instead)."""


def _zstd_without_size(section: bytes | memoryview, bytes_max: int) -> bytes:
    decompressor = zstandard.ZstdDecompressor()
    pieces: list[bytes] = []
    total = 0
    try:
        with decompressor.stream_reader(section, read_across_frames=True) as reader:
            while piece := reader.read(READ_CHUNK_BYTES):
                total += len(piece)
                if total > bytes_max:
                    raise CorruptBatchError(
                        f"zstd records section decompresses to more than {bytes_max} bytes"
                    )
                pieces.append(piece)
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section does not decompress: {error}") from None
    return b"".join(pieces)


def _gzip(section: bytes | memoryview, bytes_max: int) -> bytes:
    decompressor = zlib.decompressobj(GZIP_WINDOW_BITS)
    try:
        data = decompressor.decompress(section, bytes_max + 1)
    except zlib.error as error:
        raise CorruptBatchError(f"gzip records section does not decompress: {error}") from None
    if len(data) > bytes_max:
        raise CorruptBatchError(f"gzip records section decompresses to more than {bytes_max} bytes")
    return data


def storable_batch(batch: bytes, decompressed_bytes_max: int) -> bytes:
    """``batch`` itself when the log stores it as it is, else the same batch compressed
    again as a zstd frame that declares its size. CorruptBatchError for a batch that
    fails its CRC or does not decompress; UnsupportedCompressionError for snappy or lz4."""
    if len(batch) < RECORDS_OFFSET:
        return batch  # the broker refuses it, naming what is missing
    header = unpack_header(batch)
    codec = header.codec
    if codec == CODEC_NONE or header.size_bytes != len(batch):
        return batch  # as the log stores it, or refused by the broker with its own message
    if codec in UNSUPPORTED_CODECS:
        raise UnsupportedCompressionError(
            f"{UNSUPPORTED_CODECS[codec]} batches are not stored; compress with zstd or gzip "
            "(compression.type), or not at all"
        )
    if codec not in (CODEC_ZSTD, CODEC_GZIP):
        return batch  # an unknown codec: the broker refuses it with its own message
    crc = compute_crc(batch, 0, header.batch_length)
    if crc != header.crc:  # checked before any rewrite, which computes a new CRC
        raise CorruptBatchError(
            f"batch CRC-32C mismatch: header says 0x{header.crc:08x}, bytes give 0x{crc:08x}"
        )
    section = memoryview(batch)[RECORDS_OFFSET : header.size_bytes]
    if codec == CODEC_ZSTD:
        try:
            if zstandard.frame_content_size(section) >= 0:
                return batch  # as the log stores it
        except zstandard.ZstdError as error:
            raise CorruptBatchError(
                f"zstd records section has a bad frame header: {error}"
            ) from None
        records = _zstd_without_size(section, decompressed_bytes_max)
    else:
        records = _gzip(section, decompressed_bytes_max)
    compressed = compress(CODEC_ZSTD, records)
    return repacked(header, compressed, codec=CODEC_ZSTD)


def repacked(
    header: BatchHeader,
    section: bytes | memoryview,
    *,
    codec: int | None = None,
    base_sequence: int | None = None,
) -> bytes:
    """A batch of ``header``'s fields around ``section`` (compressed as ``codec`` says), with
    ``codec`` or ``base_sequence`` changed when given and a CRC computed anew. Call it on
    batches whose CRC was checked."""
    attributes = header.attributes
    if codec is not None:
        attributes = (attributes & ~CODEC_MASK) | codec
    buffer = bytearray(RECORDS_OFFSET + len(section))
    buffer[RECORDS_OFFSET:] = section
    pack_header(
        buffer,
        base_offset=header.base_offset,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        first_timestamp_ms=header.first_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=header.producer_id,
        producer_generation=header.producer_generation,
        base_sequence=header.base_sequence if base_sequence is None else base_sequence,
        record_count=header.record_count,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    return bytes(buffer)
