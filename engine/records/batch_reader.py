"""Reading record batches: validation and lazy record iteration.

``RecordBatch(buffer)`` wraps the bytes of one batch. ``validate()`` checks
length and CRC; ``records()`` decompresses the records section (only then)
and yields ``Record``s. ``iter_batches(buffer)`` walks consecutive batches, as
a fetch response or a segment file holds them.

Every malformed byte raises CorruptBatchError, never IndexError or struct.error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import (
    LENGTH_PREFIX_BYTES,
    RECORDS_OFFSET,
    BatchHeader,
    read_length_prefix,
    validate_batch,
)
from twinlog.engine.records.compression import decompress
from twinlog.engine.records.varint import VARINT_BYTES_MAX, decode_varint


class Record(NamedTuple):
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordBatch:
    """One batch's bytes. Thread rule: immutable once validated; share freely."""

    __slots__ = ("buffer", "header")

    def __init__(self, buffer: bytes | memoryview, position: int = 0) -> None:
        """Validate (length, magic, codec, CRC) the batch at ``position`` of ``buffer``."""
        self.header: BatchHeader = validate_batch(buffer, position)
        end = position + self.header.size_bytes
        self.buffer = memoryview(buffer)[position:end]

    def __len__(self) -> int:
        return self.header.record_count

    def records(self) -> Iterator[Record]:
        header = self.header
        section = decompress(header.codec, self.buffer[RECORDS_OFFSET:])
        yield from _decode_records(section, header)


def _read_bytes(section: bytes | memoryview, position: int, what: str) -> tuple[bytes | None, int]:
    length, position = decode_varint(section, position, VARINT_BYTES_MAX)
    if length == -1:
        return None, position
    if length < -1 or position + length > len(section):
        raise CorruptBatchError(
            f"{what} length is {length} at byte {position} of the records section, "
            f"but only {len(section) - position} bytes remain"
        )
    return bytes(section[position : position + length]), position + length


def _decode_records(section: bytes | memoryview, header: BatchHeader) -> Iterator[Record]:
    position = 0
    end = len(section)
    for index in range(header.record_count):
        length, position = decode_varint(section, position, VARINT_BYTES_MAX)
        record_end = position + length
        if length < 0 or record_end > end:
            raise CorruptBatchError(
                f"record {index} says {length} bytes at byte {position} of the records "
                f"section, but only {end - position} bytes remain"
            )
        position += 1  # record attributes, unused
        timestamp_delta_ms, position = decode_varint(section, position)
        offset_delta, position = decode_varint(section, position, VARINT_BYTES_MAX)
        key, position = _read_bytes(section, position, "key")
        value, position = _read_bytes(section, position, "value")
        header_count, position = decode_varint(section, position, VARINT_BYTES_MAX)
        if header_count < 0 or header_count > length:
            raise CorruptBatchError(f"record {index} says {header_count} headers")
        headers = []
        for _ in range(header_count):
            header_key, position = _read_bytes(section, position, "header key")
            if header_key is None:
                raise CorruptBatchError(f"record {index} has a header with a null key")
            header_value, position = _read_bytes(section, position, "header value")
            try:
                headers.append((header_key.decode("utf-8"), header_value))
            except UnicodeDecodeError:
                raise CorruptBatchError(
                    f"record {index} has a header key that is not UTF-8"
                ) from None
        if position != record_end:
            raise CorruptBatchError(
                f"record {index} says it ends at byte {record_end} of the records section, "
                f"its fields end at {position}"
            )
        if not 0 <= offset_delta <= header.last_offset_delta:
            raise CorruptBatchError(
                f"record {index} has offset delta {offset_delta}, expected 0.."
                f"{header.last_offset_delta}"
            )
        yield Record(
            header.base_offset + offset_delta,
            header.first_timestamp_ms + timestamp_delta_ms,
            key,
            value,
            tuple(headers),
        )
    if position != end:
        raise CorruptBatchError(
            f"records section has {end - position} bytes after its {header.record_count} records"
        )


def iter_batches(
    buffer: bytes | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[RecordBatch]:
    """Each batch of a buffer of consecutive batches, validated.

    With ``allow_partial_tail`` a last incomplete batch (as a fetch cut at a byte
    limit may return) ends the iteration instead of raising.
    """
    position = 0
    end = len(buffer)
    while position < end:
        if allow_partial_tail:
            if end - position < LENGTH_PREFIX_BYTES:
                return
            _, batch_length = read_length_prefix(buffer, position)
            if position + LENGTH_PREFIX_BYTES + batch_length > end:
                return
        batch = RecordBatch(buffer, position)
        yield batch
        position += batch.header.size_bytes
