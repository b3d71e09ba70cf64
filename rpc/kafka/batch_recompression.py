"""Batches from Kafka clients that the log does not take as they are, compressed again.

The log stores records sections uncompressed or as one zstd frame that declares its
decompressed size (so a reader can refuse a "zip bomb" before allocating,
``engine/records/compression``). librdkafka writes zstd frames without that size, and
gzip is every Kafka client's oldest codec; such a batch is decompressed here (bounded by
``decompressed_bytes_max``) and compressed again as a zstd frame with its size, its
header otherwise unchanged (offsets, timestamps, producer id, epoch and sequence), its
CRC computed anew. The CRC the client sent is checked first, so a damaged batch is
refused, never repaired. snappy and lz4 are refused with UNSUPPORTED_COMPRESSION_TYPE.

The rewrite takes its bytes from the decompression budget the broker's own check uses
(``engine/records/decompression_budget``), so inflated sections in flight stay bounded
however many connections send them: a first pass counts what the section inflates to,
keeping nothing; the rewrite then reserves that much (waiting a little, else refused
NotEnoughResourcesError, retriable) and streams the section from one codec into the
other in chunks, never holding it whole.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import zstandard
from kafka.record.default_records import DefaultRecordBatch

from twinlog.engine.base.errors import CorruptBatchError, NotEnoughResourcesError
from twinlog.engine.records.batch_format import (
    RECORDS_OFFSET,
    BatchHeader,
    compute_crc,
    pack_header,
    unpack_header,
)
from twinlog.engine.records.compression import CODEC_MASK, CODEC_ZSTD, ZSTD_LEVEL_DEFAULT
from twinlog.engine.records.decompression_budget import DecompressionBudget

CODEC_NONE = DefaultRecordBatch.CODEC_NONE
CODEC_GZIP = DefaultRecordBatch.CODEC_GZIP
UNSUPPORTED_CODECS = {
    DefaultRecordBatch.CODEC_SNAPPY: "snappy",
    DefaultRecordBatch.CODEC_LZ4: "lz4",
}
GZIP_WINDOW_BITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate
READ_CHUNK_BYTES = 1 << 20
# The counting pass holds one piece this size per connection, outside the budget: small.
COUNT_CHUNK_BYTES = 64 * 1024


class UnsupportedCompressionError(Exception):
    """A codec twinlog does not read (the message names it and what to use instead)."""


def _codec_name(codec: int) -> str:
    return "gzip" if codec == CODEC_GZIP else "zstd"


def _gzip_pieces(section: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    decompressor = zlib.decompressobj(GZIP_WINDOW_BITS)
    pending: bytes | memoryview = section
    try:
        while not decompressor.eof:
            piece = decompressor.decompress(pending, piece_bytes)
            pending = decompressor.unconsumed_tail
            if not piece and not pending:
                return  # a stream cut short: what it held (the broker refuses the records)
            if piece:
                yield piece
    except zlib.error as error:
        raise CorruptBatchError(f"gzip records section does not decompress: {error}") from None


def _zstd_pieces(section: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    decompressor = zstandard.ZstdDecompressor()
    try:
        with decompressor.stream_reader(section, read_across_frames=True) as reader:
            while piece := reader.read(piece_bytes):
                yield piece
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section does not decompress: {error}") from None


def _inflated_pieces(codec: int, section: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    """The section decompressed, in pieces of at most ``piece_bytes``."""
    if codec == CODEC_GZIP:
        return _gzip_pieces(section, piece_bytes)
    return _zstd_pieces(section, piece_bytes)


def _inflated_bytes(codec: int, section: bytes | memoryview, bytes_max: int) -> int:
    """How many bytes the section decompresses to, counted without keeping them;
    CorruptBatchError past ``bytes_max``."""
    total = 0
    for piece in _inflated_pieces(codec, section, COUNT_CHUNK_BYTES):
        total += len(piece)
        if total > bytes_max:
            raise CorruptBatchError(
                f"{_codec_name(codec)} records section decompresses to more than {bytes_max} "
                "bytes (the Kafka listener's produce_decompressed_bytes_max, at most the "
                "decompression budget); send smaller batches"
            )
    return total


def _as_zstd(codec: int, section: bytes | memoryview, inflated_bytes: int) -> bytes:
    """One zstd frame declaring ``inflated_bytes`` (what the counting pass found), streamed
    from the section piece by piece: the decompressed records are never held whole."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL_DEFAULT, write_content_size=True)
    stream = compressor.compressobj(size=inflated_bytes)
    frames: list[bytes] = []
    try:
        for piece in _inflated_pieces(codec, section, READ_CHUNK_BYTES):
            frames.append(stream.compress(piece))
        frames.append(stream.flush())
    except zstandard.ZstdError as error:  # the pledged size missed: never for the same bytes
        raise CorruptBatchError(f"{_codec_name(codec)} records section changed: {error}") from None
    return b"".join(frames)


def storable_batch(batch: bytes, decompressed_bytes_max: int, budget: DecompressionBudget) -> bytes:
    """``batch`` itself when the log stores it as it is, else the same batch compressed
    again as a zstd frame that declares its size. The rewrite holds what the section
    decompresses to in ``budget`` (the broker's, shared with every door).

    CorruptBatchError for a batch that fails its CRC, does not decompress or decompresses
    to more than ``decompressed_bytes_max`` (or the budget's whole size);
    UnsupportedCompressionError for snappy or lz4; NotEnoughResourcesError (retriable)
    when the budget stays spent."""
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
    # A reservation never passes the budget's size, so neither may the section.
    inflated_bytes = _inflated_bytes(codec, section, min(decompressed_bytes_max, budget.bytes_max))
    try:
        with budget.reserve(inflated_bytes):
            compressed = _as_zstd(codec, section, inflated_bytes)
    except NotEnoughResourcesError as error:
        raise NotEnoughResourcesError(
            f"a {_codec_name(codec)} batch rewritten as zstd needs {inflated_bytes} bytes "
            f"decompressed: {error}"
        ) from None
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
