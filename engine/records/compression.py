"""Compression codecs of the records section of a batch.

The codec id lives in the low three bits of the batch attributes, numbered as in Kafka
so that the values read the same: 0 = none, 1 = gzip, 2 = snappy, 3 = lz4, 4 = zstd.
A batch is stored as its producer wrote it, whatever its codec: the broker moves
compressed bytes as they came, and only readers that want records decompress.

The formats are Kafka's: gzip is one or more gzip members (RFC 1952); snappy is the
Java client's xerial framing (a 16-byte header, then blocks of a big-endian length and
a raw snappy block), or one raw snappy block as librdkafka may write it; lz4 is one LZ4
frame (independent blocks); zstd is one frame (or several, when none declares its size).

Decompression never trusts a size and never inflates a section whole at once: a section
that declares its size (zstd and lz4 frame headers, every snappy block's header) is
refused from that declaration when it is above the limit, before anything is
decompressed, and then held to it; one that declares none (gzip, a zstd or lz4 frame
without a content size) is decompressed in pieces of at most ``PIECE_BYTES`` and
refused as soon as the pieces pass the limit. ``decompressed_size`` tells what a section
decompresses to (declared, or counted in pieces that are dropped as they come), so that
a caller can reserve that much (``decompression_budget``) before ``decompress`` holds it.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame
import zstandard

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.base.units import MEBIBYTE

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
CODEC_MASK = 0x07
CODEC_BY_NAME = {
    "none": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}
CODEC_NAMES = {value: name for name, value in CODEC_BY_NAME.items()}

ZSTD_LEVEL_DEFAULT = 3
# A decompressed records section larger than this is refused rather than
# allocated: it protects readers from a "zip bomb" in a hostile batch. The produce
# path passes a far smaller cap (the broker's batch_decompressed_bytes_max).
DECOMPRESSED_BYTES_MAX = 256 * MEBIBYTE
# The most a section of a codec without a declared size is inflated by at once.
PIECE_BYTES = 1 * MEBIBYTE
# What counting keeps at once (each piece is dropped before the next): small.
COUNT_PIECE_BYTES = 64 * 1024

GZIP_WINDOW_BITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate
GZIP_LEVEL = 6  # zlib's default, as Kafka's (GZIPOutputStream's)
# The xerial framing of the Java client's snappy: a marker byte and "SNAPPY\0", then
# the version and the oldest compatible version (int32 each), then the blocks.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
XERIAL_BLOCK_BYTES = 32 * 1024  # uncompressed bytes per block, as xerial writes them
XERIAL_LENGTH_BYTES = 4
LZ4_BLOCK_SIZE = lz4.frame.BLOCKSIZE_MAX64KB  # Kafka's (KafkaLZ4BlockOutputStream)
# A zstd block header (RFC 8878 3.1.1.2): last-block bit, type (RLE: one byte stands for
# the block), size; a frame may end with a 4-byte checksum.
ZSTD_BLOCK_HEADER_BYTES = 3
ZSTD_BLOCK_RLE = 1
ZSTD_CHECKSUM_BYTES = 4

# zstandard's (de)compressor objects are not thread-safe; keep one per thread.
_local = threading.local()


def codec_id(name: str) -> int:
    """Codec id for a name (Kafka's compression.type values); ValueError for any other."""
    try:
        return CODEC_BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"unknown compression {name!r}: use one of {sorted(CODEC_BY_NAME)}"
        ) from None


def _name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"codec {codec}")


# --- compressing -------------------------------------------------------------------------


def compress(codec: int, data: bytes, level: int = ZSTD_LEVEL_DEFAULT) -> bytes:
    """``data`` compressed as ``codec`` writes it for Kafka's readers; ``level`` is
    zstd's (the other codecs take their Kafka client's default)."""
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
    if codec == CODEC_GZIP:
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WINDOW_BITS)
        return compressor.compress(data) + compressor.flush()
    if codec == CODEC_SNAPPY:
        view = memoryview(data)
        parts = [XERIAL_HEADER]
        for start in range(0, len(view), XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_BYTES]))
            parts += [len(block).to_bytes(XERIAL_LENGTH_BYTES, "big"), block]
        return b"".join(parts)
    if codec == CODEC_LZ4:
        # Independent blocks (Kafka's readers refuse linked ones), the size declared.
        return lz4.frame.compress(
            data, block_size=LZ4_BLOCK_SIZE, block_linked=False, store_size=True
        )
    raise ValueError(f"unknown codec id {codec}")


# --- sizes -------------------------------------------------------------------------------


def _unsupported(codec: int) -> CorruptBatchError:
    return CorruptBatchError(
        f"unsupported compression codec {codec} in batch attributes "
        f"(expected one of {sorted(CODEC_NAMES)}: {', '.join(CODEC_BY_NAME)})"
    )


def _snappy_blocks(data: bytes | memoryview) -> list[memoryview]:
    """The raw snappy blocks of a section: those of its xerial framing, else itself."""
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return [view]
    if len(view) < len(XERIAL_HEADER):
        raise CorruptBatchError(
            f"snappy records section has a cut xerial header ({len(view)} bytes of 16)"
        )
    blocks: list[memoryview] = []
    position = len(XERIAL_HEADER)
    while position < len(view):
        if position + XERIAL_LENGTH_BYTES > len(view):
            raise CorruptBatchError(
                f"snappy records section ends inside a block length at byte {position}"
            )
        length = int.from_bytes(view[position : position + XERIAL_LENGTH_BYTES], "big")
        start = position + XERIAL_LENGTH_BYTES
        if start + length > len(view):
            raise CorruptBatchError(
                f"snappy block at byte {position} says {length} bytes, the section holds "
                f"{len(view) - start} more"
            )
        blocks.append(view[start : start + length])
        position = start + length
    return blocks


def _snappy_block_size(block: memoryview, index: int) -> int:
    try:
        return int(cramjam.snappy.decompress_raw_len(block))
    except cramjam.DecompressionError as error:
        raise CorruptBatchError(
            f"snappy block {index} of the records section has a bad header: {error}"
        ) from None


def decompressed_size_declared(codec: int, data: bytes | memoryview) -> int | None:
    """Bytes the records section says it decompresses to (its own length if
    uncompressed), read from its headers without decompressing anything; None when its
    format declares none (gzip, a zstd or lz4 frame written without its content size).

    CorruptBatchError for an unknown codec or a malformed header.
    """
    if codec == CODEC_NONE:
        return len(data)
    if codec == CODEC_ZSTD:
        try:
            content_bytes = zstandard.frame_content_size(data)
        except zstandard.ZstdError as error:
            raise CorruptBatchError(
                f"zstd records section has a bad frame header: {error}"
            ) from None
        return int(content_bytes) if content_bytes >= 0 else None
    if codec == CODEC_SNAPPY:
        blocks = _snappy_blocks(data)
        return sum(_snappy_block_size(block, index) for index, block in enumerate(blocks))
    if codec == CODEC_LZ4:
        try:
            content_bytes = lz4.frame.get_frame_info(data)["content_size"]
        except RuntimeError as error:
            raise CorruptBatchError(
                f"lz4 records section has a bad frame header: {error}"
            ) from None
        return int(content_bytes) if content_bytes else None  # 0: not declared
    if codec == CODEC_GZIP:
        return None
    raise _unsupported(codec)


def decompressed_size(codec: int, data: bytes | memoryview, bytes_max: int) -> int:
    """Bytes the records section decompresses to: what it declares, else counted by
    decompressing it in small pieces that are dropped as they come (nothing is kept). A
    count stops at ``bytes_max + 1``: a larger answer means "more than ``bytes_max``".

    CorruptBatchError for a section that is malformed or does not decompress.
    """
    declared = decompressed_size_declared(codec, data)
    if declared is not None:
        return declared
    counted = 0
    for piece in _pieces(codec, data, COUNT_PIECE_BYTES):
        counted += len(piece)
        if counted > bytes_max:
            return bytes_max + 1
    return counted


# --- decompressing -----------------------------------------------------------------------


def _gzip_pieces(data: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    pending: bytes | memoryview = data
    try:
        while True:  # one gzip member after another, as Java's GZIPInputStream reads them
            decompressor = zlib.decompressobj(GZIP_WINDOW_BITS)
            while not decompressor.eof:
                piece = decompressor.decompress(pending, piece_bytes)
                pending = decompressor.unconsumed_tail
                if piece:
                    yield piece
                elif not pending:
                    raise CorruptBatchError(
                        "gzip records section is cut short: its stream does not end"
                    )
            pending = decompressor.unused_data
            if not pending:
                return
    except zlib.error as error:
        raise CorruptBatchError(f"gzip records section does not decompress: {error}") from None


def _lz4_pieces(data: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    pending: bytes | memoryview = data
    try:
        while not decompressor.eof:
            piece = decompressor.decompress(pending, max_length=piece_bytes)
            pending = b""
            if piece:
                yield piece
            elif decompressor.needs_input:
                raise CorruptBatchError("lz4 records section is cut short: its frame does not end")
    except RuntimeError as error:
        raise CorruptBatchError(f"lz4 records section does not decompress: {error}") from None
    if decompressor.unused_data:
        raise CorruptBatchError(
            f"lz4 records section holds {len(decompressor.unused_data)} bytes after its frame"
        )


def _zstd_frames_end(data: bytes | memoryview) -> None:
    """Walk the frames' block headers (no decompression) and check that the section is
    whole frames: the streaming reader stops quietly at a cut frame."""
    view = memoryview(data)
    position = 0
    while position < len(view):
        try:
            frame = view[position:]
            header_bytes = zstandard.frame_header_size(frame)
            has_checksum = zstandard.get_frame_parameters(frame).has_checksum
        except zstandard.ZstdError as error:
            raise CorruptBatchError(
                f"zstd records section has a bad frame header at byte {position}: {error}"
            ) from None
        position += header_bytes
        last_block = False
        while not last_block:
            if position + ZSTD_BLOCK_HEADER_BYTES > len(view):
                raise CorruptBatchError("zstd records section is cut short inside a frame")
            block_header = int.from_bytes(view[position : position + 3], "little")
            last_block = bool(block_header & 1)
            block_type, block_size = (block_header >> 1) & 3, block_header >> 3
            position += ZSTD_BLOCK_HEADER_BYTES + (
                1 if block_type == ZSTD_BLOCK_RLE else block_size
            )
        position += ZSTD_CHECKSUM_BYTES if has_checksum else 0
        if position > len(view):
            raise CorruptBatchError("zstd records section is cut short inside a frame")


def _zstd_pieces(data: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    _zstd_frames_end(data)
    try:
        decompressor = zstandard.ZstdDecompressor()
        with decompressor.stream_reader(data, read_across_frames=True) as reader:
            while piece := reader.read(piece_bytes):
                yield piece
    except zstandard.ZstdError as error:
        raise CorruptBatchError(f"zstd records section does not decompress: {error}") from None


def _pieces(codec: int, data: bytes | memoryview, piece_bytes: int) -> Iterator[bytes]:
    """The section decompressed, in pieces of at most ``piece_bytes``: for the codecs
    whose size may go undeclared (a snappy section always declares its size)."""
    if codec == CODEC_GZIP:
        return _gzip_pieces(data, piece_bytes)
    if codec == CODEC_LZ4:
        return _lz4_pieces(data, piece_bytes)
    if codec == CODEC_ZSTD:
        return _zstd_pieces(data, piece_bytes)
    raise _unsupported(codec)


def decompress(
    codec: int, data: bytes | memoryview, bytes_max: int = DECOMPRESSED_BYTES_MAX
) -> bytes | memoryview:
    """Decompress a records section; CorruptBatchError on anything malformed.

    A section that declares more than ``bytes_max`` is refused before any output is
    allocated, and then held to what it declared; one that declares nothing is inflated
    in pieces and refused as soon as they pass ``bytes_max``: a bomb costs at most the
    limit and one piece, never what it holds.
    """
    declared = decompressed_size_declared(codec, data)
    if codec == CODEC_NONE:
        return data
    if declared is not None and declared > bytes_max:
        raise CorruptBatchError(
            f"{_name(codec)} records section declares {declared} bytes decompressed, more "
            f"than the {bytes_max}-byte limit"
        )
    if codec == CODEC_ZSTD and declared is not None:
        return _zstd_declared(data, declared)
    if codec == CODEC_SNAPPY and declared is not None:
        return _snappy_whole(data, declared)
    limit = bytes_max if declared is None else declared
    pieces: list[bytes] = []
    inflated = 0
    for piece in _pieces(codec, data, min(PIECE_BYTES, limit + 1)):
        inflated += len(piece)
        if inflated > limit:
            if declared is not None:
                raise CorruptBatchError(
                    f"{_name(codec)} records section declares {declared} bytes but holds more"
                )
            raise CorruptBatchError(
                f"{_name(codec)} records section decompresses to more than the "
                f"{bytes_max}-byte limit"
            )
        pieces.append(piece)
    if declared is not None and inflated != declared:
        raise CorruptBatchError(
            f"{_name(codec)} records section declares {declared} bytes but holds {inflated}"
        )
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _snappy_whole(data: bytes | memoryview, declared: int) -> memoryview:
    """Every block straight into one buffer of the declared size (each block's size was
    read from its header, and the library refuses a block that holds another)."""
    output = bytearray(declared)
    view = memoryview(output)
    position = 0
    for index, block in enumerate(_snappy_blocks(data)):
        size = _snappy_block_size(block, index)
        try:
            if size:
                cramjam.snappy.decompress_raw_into(block, view[position : position + size])
        except cramjam.DecompressionError as error:
            raise CorruptBatchError(
                f"snappy block {index} of the records section does not decompress: {error}"
            ) from None
        position += size
    return view


def _zstd_declared(data: bytes | memoryview, content_bytes: int) -> bytes:
    """One zstd frame that declares ``content_bytes`` (at most the caller's limit),
    streamed into that much and refused as soon as it would pass it: a frame that lies
    costs one byte more than its claim, never what it holds."""
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
