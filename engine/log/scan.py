"""Validating scans of a segment file: every batch's length, header, CRC and offset.

Recovery and index rebuilds use ``scan_batches``; it stops at the first bad
batch and says where and why, and ``find_valid_batch_after`` then tells a torn
tail (nothing valid after the bad batch) from corruption in the middle (a
valid batch further on). Both read with ``os.pread`` in chunks, so memory stays
at one chunk or one batch, whichever is larger.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.records.batch_format import (
    HEADER_BYTES,
    LENGTH_PREFIX,
    LENGTH_PREFIX_BYTES,
    MAGIC,
    MAGIC_OFFSET,
    BatchHeader,
    read_length_prefix,
    unpack_header,
    validate_batch,
)

SCAN_CHUNK_BYTES = MEBIBYTE
# Offsets of one segment fit a u32 relative offset; a "valid" batch further
# than that from the expected offset is old garbage, not our data.
PLAUSIBLE_OFFSET_DISTANCE_MAX = 1 << 32


@dataclass
class ScanResult:
    """What a scan of ``[start_position, file end)`` found."""

    end_position: int  # position after the last good batch
    next_offset: int  # base offset the batch at end_position must have
    batches_checked: int = 0
    last_header: BatchHeader | None = None
    bad_position: int | None = None  # first bad batch, or None if the scan reached the end
    bad_reason: str = ""


class _ChunkReader:
    """Bytes of a file around a moving position, read a chunk (or one batch) at a time."""

    def __init__(self, fd: int, file_bytes: int) -> None:
        self.fd = fd
        self.file_bytes = file_bytes
        self.buffer = b""
        self.buffer_position = 0  # file position of buffer[0]

    def view(self, position: int, length: int) -> tuple[bytes, int]:
        """(buffer, index) with ``length`` bytes from ``position`` at ``buffer[index:]``."""
        index = position - self.buffer_position
        if index < 0 or index + length > len(self.buffer):
            size = min(max(length, SCAN_CHUNK_BYTES), self.file_bytes - position)
            self.buffer = os.pread(self.fd, size, position)
            self.buffer_position, index = position, 0
            if len(self.buffer) < length:
                raise CorruptBatchError(
                    f"read {len(self.buffer)} bytes at position {position}, expected {length} "
                    "(file shrank during the scan?)",
                    position,
                )
        return self.buffer, index


def iter_valid_batches(
    fd: int, start_position: int, file_bytes: int, result: ScanResult
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """(position, header, batch bytes) of each good batch from ``start_position`` on.

    A batch is good when its length fits in the file, its header parses, its
    CRC matches and its base offset is ``result.next_offset`` (continuity).
    Stops at the first bad batch or at ``file_bytes``, keeping ``result`` up to
    date (so after the loop it says where and why it stopped). The views stay
    valid as long as they are referenced.
    """
    reader = _ChunkReader(fd, file_bytes)
    position = start_position
    while position < file_bytes:
        remaining = file_bytes - position
        try:
            buffer, index = reader.view(position, min(LENGTH_PREFIX_BYTES, remaining))
            _, batch_length = read_length_prefix(buffer, index)
            batch_bytes = LENGTH_PREFIX_BYTES + batch_length
            if batch_bytes > remaining:
                raise CorruptBatchError(
                    f"batch says {batch_bytes} bytes, only {remaining} remain in the file", position
                )
            buffer, index = reader.view(position, batch_bytes)
            header = validate_batch(buffer, index)
        except CorruptBatchError as error:
            result.bad_position, result.bad_reason = position, str(error)
            return
        if header.base_offset != result.next_offset:
            result.bad_position = position
            result.bad_reason = (
                f"batch base offset is {header.base_offset}, expected {result.next_offset} "
                "(the next offset after the previous batch)"
            )
            return
        result.batches_checked += 1
        result.last_header = header
        result.next_offset = header.next_offset
        result.end_position = position + batch_bytes
        yield position, header, memoryview(buffer)[index : index + batch_bytes]
        position += batch_bytes


def scan_batches(
    fd: int,
    start_position: int,
    file_bytes: int,
    expected_next_offset: int,
    on_batch: Callable[[int, BatchHeader], None],
) -> ScanResult:
    """Validate each batch from ``start_position`` to ``file_bytes``; stop at the first bad one.

    ``on_batch(position, header)`` is called for each good batch, in order.
    """
    result = ScanResult(start_position, expected_next_offset)
    for position, header, _ in iter_valid_batches(fd, start_position, file_bytes, result):
        on_batch(position, header)
    return result


def find_valid_batch_after(
    fd: int, bad_position: int, file_bytes: int, min_base_offset: int
) -> int | None:
    """Position of the first plausible valid batch after the bad one at ``bad_position``, or None.

    Plausible: magic byte, a length that fits in the file, a good CRC, and a base
    offset at or above ``min_base_offset`` (the offset the bad batch should have
    had: later batches of a log only ever have higher offsets) and not absurdly far
    above it. Candidates are found by searching for the magic byte, so the cost is
    one check per 0x02 byte.

    A torn batch's own bytes may hold a valid batch (a record whose value is a
    batch, as a mirroring application writes): when the bad batch's header still
    reads (magic, base offset), a candidate inside the bytes it claims counts only
    if it starts where the bad batch says its successor starts: its base offset is
    the bad batch's next offset.
    """
    claimed_end, claimed_next_offset = _claimed_extent(fd, bad_position, min_base_offset)
    overlap = MAGIC_OFFSET  # a candidate's magic byte lies MAGIC_OFFSET bytes after its start
    chunk_position = bad_position + 1
    while chunk_position < file_bytes:
        chunk = os.pread(
            fd, min(SCAN_CHUNK_BYTES + overlap, file_bytes - chunk_position), chunk_position
        )
        search_from = MAGIC_OFFSET
        while True:
            magic_index = chunk.find(bytes([MAGIC]), search_from)
            if magic_index < 0:
                break
            search_from = magic_index + 1
            candidate = chunk_position + magic_index - MAGIC_OFFSET
            inside = candidate < claimed_end
            if _is_valid_batch_at(
                fd,
                chunk,
                magic_index - MAGIC_OFFSET,
                candidate,
                file_bytes,
                claimed_next_offset if inside else min_base_offset,
                exact=inside,
            ):
                return candidate
        if len(chunk) <= overlap:
            break
        chunk_position += len(chunk) - overlap
    return None


def _claimed_extent(fd: int, bad_position: int, expected_base_offset: int) -> tuple[int, int]:
    """(end position, next offset) the bad batch's header claims, if it reads as the batch
    expected there (magic, base offset, sane lengths); else (bad_position, -1): no claim."""
    no_claim = (bad_position, -1)
    header = os.pread(fd, HEADER_BYTES, bad_position)
    if len(header) < HEADER_BYTES:
        return no_claim
    claimed = unpack_header(header)  # unchecked: the CRC failed or is cut
    if (
        claimed.magic != MAGIC
        or claimed.base_offset != expected_base_offset
        or claimed.size_bytes < HEADER_BYTES
        or claimed.last_offset_delta < 0
    ):
        return no_claim
    return bad_position + claimed.size_bytes, claimed.next_offset


def _is_valid_batch_at(
    fd: int,
    chunk: bytes,
    index: int,
    position: int,
    file_bytes: int,
    min_base_offset: int,
    exact: bool = False,
) -> bool:
    """A valid batch at ``position`` with a base offset from ``min_base_offset`` on (exactly
    ``min_base_offset`` when ``exact``)."""
    if index + LENGTH_PREFIX_BYTES > len(chunk):  # the prefix straddles the chunk's end
        chunk, index = os.pread(fd, LENGTH_PREFIX_BYTES, position), 0
        if len(chunk) < LENGTH_PREFIX_BYTES:
            return False
    base_offset, batch_length = LENGTH_PREFIX.unpack_from(chunk, index)
    if exact and base_offset != min_base_offset:
        return False
    if not min_base_offset <= base_offset < min_base_offset + PLAUSIBLE_OFFSET_DISTANCE_MAX:
        return False
    batch_bytes = LENGTH_PREFIX_BYTES + batch_length
    if batch_length < 0 or position + batch_bytes > file_bytes:
        return False
    batch = os.pread(fd, batch_bytes, position)
    try:
        validate_batch(batch)
    except CorruptBatchError:
        return False
    return True
