"""Walking the batch headers of a segment file without reading the batches' records.

Lookups (which batch holds offset N, where is the last whole batch before a
byte limit, which batch first reaches timestamp T) need only the 61-byte
headers. They are read with ``os.pread`` in small chunks, so a walk over big
batches costs one short read per batch, and a walk over small ones one read
per chunk. Nothing here checks CRCs (``DataLog.read`` checks the batches it
serves, and segment.py's walks check that offsets follow each other).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import (
    BATCH_BYTES_HARD_MAX,
    BATCH_LENGTH_MIN,
    HEADER_BYTES,
    LENGTH_PREFIX,
    MAGIC,
    MAGIC_OFFSET,
    BatchHeader,
    unpack_header,
)

# Big enough to hold the headers of a few dozen small batches, small enough
# that a walk over 1 MiB batches does not read much more than their headers.
HEADER_CHUNK_BYTES = 8192


def parse_header(buffer: bytes, index: int, file_position: int) -> BatchHeader:
    """The header at ``buffer[index:]`` (which lies at ``file_position`` of its file).

    Checks the length field and the magic byte only; raises CorruptBatchError
    naming the file position.
    """
    if len(buffer) - index < HEADER_BYTES:
        raise CorruptBatchError(
            f"batch header at position {file_position} needs {HEADER_BYTES} bytes, "
            f"found {len(buffer) - index}",
            file_position,
        )
    _, batch_length = LENGTH_PREFIX.unpack_from(buffer, index)
    if not BATCH_LENGTH_MIN <= batch_length <= BATCH_BYTES_HARD_MAX:
        raise CorruptBatchError(
            f"batch length field at position {file_position} is {batch_length}, expected "
            f"{BATCH_LENGTH_MIN}..{BATCH_BYTES_HARD_MAX}",
            file_position,
        )
    magic = buffer[index + MAGIC_OFFSET]
    if magic != MAGIC:
        raise CorruptBatchError(
            f"batch magic byte at position {file_position} is {magic}, expected {MAGIC}",
            file_position,
        )
    return unpack_header(buffer, index)


def iter_headers(
    fd: int, start_position: int, end_position: int
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in ``[start_position, end_position)`` of ``fd``.

    ``start_position`` must be a batch boundary. Raises CorruptBatchError when a
    header is malformed or a batch runs past ``end_position``.
    """
    position = start_position
    chunk = b""
    chunk_position = start_position  # file position of chunk[0]
    while position < end_position:
        index = position - chunk_position
        if index + HEADER_BYTES > len(chunk):
            chunk_position, index = position, 0
            chunk = os.pread(fd, min(HEADER_CHUNK_BYTES, end_position - position), position)
        header = parse_header(chunk, index, position)
        if position + header.size_bytes > end_position:
            raise CorruptBatchError(
                f"batch at position {position} says {header.size_bytes} bytes, but only "
                f"{end_position - position} bytes remain before position {end_position}",
                position,
            )
        yield position, header
        position += header.size_bytes
