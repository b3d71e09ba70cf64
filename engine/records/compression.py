"""Compression codecs of the records section of a batch.

The codec id lives in the low three bits of the batch attributes, numbered as
in Kafka so that the values read the same: 0 = none, 4 = zstd. Other Kafka
codecs (gzip 1, snappy 2, lz4 3) are not supported and read as corrupt.

Only the producer compresses and only readers that want records decompress:
the broker moves compressed bytes as they came.
"""

from __future__ import annotations

import threading

import zstandard

from twinlog.engine.base.errors import CorruptBatchError

CODEC_NONE = 0
CODEC_ZSTD = 4
CODEC_MASK = 0x07
CODEC_BY_NAME = {"none": CODEC_NONE, "zstd": CODEC_ZSTD}
CODEC_NAMES = {value: name for name, value in CODEC_BY_NAME.items()}

ZSTD_LEVEL_DEFAULT = 3
# A decompressed records section larger than this is refused rather than
# allocated: it protects readers from a "zip bomb" in a hostile batch.
DECOMPRESSED_BYTES_MAX = 256 * 1024 * 1024

# zstandard's (de)compressor objects are not thread-safe; keep one per thread.
_local = threading.local()


def codec_id(name: str) -> int:
    """Codec id for a name ("none" or "zstd"); ValueError for any other."""
    try:
        return CODEC_BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"unknown compression {name!r}: use one of {sorted(CODEC_BY_NAME)}"
        ) from None


def compress(codec: int, data: bytes, level: int = ZSTD_LEVEL_DEFAULT) -> bytes:
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_ZSTD:
        compressors = getattr(_local, "compressors", None)
        if compressors is None:
            compressors = _local.compressors = {}
        compressor = compressors.get(level)
        if compressor is None:
            compressor = compressors[level] = zstandard.ZstdCompressor(
                level=level, write_content_size=True
            )
        return compressor.compress(data)
    raise ValueError(f"unknown codec id {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes | memoryview:
    """Decompress a records section; CorruptBatchError on anything malformed."""
    if codec == CODEC_NONE:
        return data
    if codec != CODEC_ZSTD:
        raise CorruptBatchError(
            f"unsupported compression codec {codec} in batch attributes "
            f"(expected one of {sorted(CODEC_NAMES)})"
        )
    raw = bytes(data)
    try:
        content_bytes = zstandard.frame_content_size(raw)
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section has a bad frame header: {error}") from None
    if content_bytes < 0:
        raise CorruptBatchError("zstd records section does not declare its content size")
    if content_bytes > DECOMPRESSED_BYTES_MAX:
        raise CorruptBatchError(
            f"zstd records section declares {content_bytes} bytes, more than the "
            f"{DECOMPRESSED_BYTES_MAX}-byte limit"
        )
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    try:
        return decompressor.decompress(raw)
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section does not decompress: {error}") from None
