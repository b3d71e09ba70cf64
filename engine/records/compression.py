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
from twinlog.engine.base.units import MEBIBYTE

CODEC_NONE = 0
CODEC_ZSTD = 4
CODEC_MASK = 0x07
CODEC_BY_NAME = {"none": CODEC_NONE, "zstd": CODEC_ZSTD}
CODEC_NAMES = {value: name for name, value in CODEC_BY_NAME.items()}

ZSTD_LEVEL_DEFAULT = 3
# A decompressed records section larger than this is refused rather than
# allocated: it protects readers from a "zip bomb" in a hostile batch. The produce
# path passes a far smaller cap (the broker's batch_decompressed_bytes_max).
DECOMPRESSED_BYTES_MAX = 256 * MEBIBYTE
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


def decompressed_size_declared(codec: int, data: bytes | memoryview) -> int:
    """Bytes the records section says it decompresses to (its own length if uncompressed).

    CorruptBatchError for an unknown codec, a bad zstd frame header or a frame that does
    not declare its size (every builder writes it).
    """
    if codec == CODEC_NONE:
        return len(data)
    if codec != CODEC_ZSTD:
        raise CorruptBatchError(
            f"unsupported compression codec {codec} in batch attributes "
            f"(expected one of {sorted(CODEC_NAMES)})"
        )
    try:
        content_bytes = zstandard.frame_content_size(data)
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section has a bad frame header: {error}") from None
    if content_bytes < 0:
        raise CorruptBatchError("zstd records section does not declare its content size")
    return int(content_bytes)


def decompress(
    codec: int, data: bytes | memoryview, bytes_max: int = DECOMPRESSED_BYTES_MAX
) -> bytes | memoryview:
    """Decompress a records section; CorruptBatchError on anything malformed.

    A section that declares more than ``bytes_max`` is refused before any output is
    allocated; output is then streamed into what the frame declared and refused as soon
    as it would pass it, so a frame that lies costs one byte more than its claim, never
    what it holds.
    """
    content_bytes = decompressed_size_declared(codec, data)
    if codec == CODEC_NONE:
        return data
    if content_bytes > bytes_max:
        raise CorruptBatchError(
            f"zstd records section declares {content_bytes} bytes decompressed, more than "
            f"the {bytes_max}-byte limit"
        )
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    try:
        with decompressor.stream_reader(data, read_across_frames=False) as reader:
            # One allocation of what the frame declares (at most ``bytes_max``), then one
            # byte more to see whether the frame holds more than it declared.
            section = reader.read(content_bytes) if content_bytes else b""
            while len(section) < content_bytes:  # a frame's output may come in pieces
                piece = reader.read(content_bytes - len(section))
                if not piece:
                    break
                section += piece
            if len(section) == content_bytes and reader.read(1):
                raise CorruptBatchError(
                    f"zstd records section declares {content_bytes} bytes but holds more"
                )
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section does not decompress: {error}") from None
    if len(section) != content_bytes:
        raise CorruptBatchError(
            f"zstd records section declares {content_bytes} bytes but holds {len(section)}"
        )
    return section
