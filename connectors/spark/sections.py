"""The decompressed records section of a validated batch, in one zstd call.

The engine's ``records_section`` streams a frame out in pieces (it is written
for hostile input of any size); here a zstd frame that declares its size is
decompressed in one call into exactly that size, after the same checks of it. Every
other codec (gzip, snappy, lz4, a zstd frame without its size) goes to the engine's. Whatever the
one call refuses (a frame that holds more or less than it declares, data after
the frame, a broken frame) is handed to the engine's decompressor, which refuses
it in its own words: the same batches are refused, with the same errors.
"""

from __future__ import annotations

import threading

import zstandard

from twinlog.engine.records.batch_format import RECORDS_OFFSET, BatchHeader
from twinlog.engine.records.compression import (
    CODEC_ZSTD,
    DECOMPRESSED_BYTES_MAX,
    decompressed_size_declared,
)
from twinlog.engine.records.rewrite import records_section as engine_records_section

_local = threading.local()  # zstandard's decompressors are not thread-safe


def records_section(header: BatchHeader, batch: bytes | memoryview) -> bytes | memoryview:
    """The records of ``batch`` (whole batch bytes), decompressed; CorruptBatchError if
    they do not decompress."""
    if header.codec != CODEC_ZSTD:
        return engine_records_section(batch, header)
    compressed = memoryview(batch)[RECORDS_OFFSET : header.size_bytes]
    declared_bytes = decompressed_size_declared(header.codec, compressed)
    if declared_bytes is None or declared_bytes > DECOMPRESSED_BYTES_MAX:
        return engine_records_section(batch, header)  # streams it in pieces, or refuses it
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    try:
        section: bytes = decompressor.decompress(compressed, allow_extra_data=False)
    except zstandard.ZstdError:
        return engine_records_section(batch, header)  # refuses it, in its words
    if len(section) != declared_bytes:
        return engine_records_section(batch, header)
    return section
