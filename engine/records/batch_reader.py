"""Reading record batches: validation and lazy record iteration.

``RecordBatch(buffer)`` wraps the bytes of one batch and checks its length
and CRC; ``records()`` decompresses the records section (only then), decodes
it with ``record_decoder.decode_records`` and yields ``Record``s.
``iter_batches(buffer)`` walks consecutive batches, as a fetch response or a
segment file holds them.

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
    read_header,
    read_length_prefix,
    validate_batch,
)
from twinlog.engine.records.compression import decompress
from twinlog.engine.records.record_decoder import Headers, RecordColumns, decode_records


class Record(NamedTuple):
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class RecordBatch:
    """One batch's bytes. Thread rule: immutable once validated; share freely."""

    __slots__ = ("buffer", "header")

    def __init__(
        self, buffer: bytes | memoryview, position: int = 0, *, crc_checked: bool = False
    ) -> None:
        """Validate (length, magic, codec, CRC) the batch at ``position`` of ``buffer``.
        ``crc_checked``: its source checked the CRC already (a ``DataLog.read`` returns
        only checked batches), so only the header is read and checked."""
        self.header: BatchHeader = (
            read_header(buffer, position) if crc_checked else validate_batch(buffer, position)
        )
        end = position + self.header.size_bytes
        self.buffer = memoryview(buffer)[position:end]

    def __len__(self) -> int:
        return self.header.record_count

    def columns(self, *, views: bool = False) -> RecordColumns:
        """The batch's records as one list per field, in order (decompressed and decoded
        now, every time: callers that build their own record objects start here).
        ``views``: an uncompressed batch's keys and values are views of its buffer, not
        copies (``decode_records``).

        Raises CorruptBatchError if a record does not decode.
        """
        header = self.header
        return decode_records(
            decompress(header.codec, self.buffer[RECORDS_OFFSET:]), header, views=views
        )

    def records(self) -> Iterator[Record]:
        """The batch's records, in order. Decompresses and decodes (all of them) on first use.

        Raises CorruptBatchError, before yielding any, if a record does not decode.
        """
        columns = self.columns()
        yield from map(
            Record,
            columns.offsets,
            columns.timestamps_ms,
            columns.keys,
            columns.values,
            columns.headers,
        )


def iter_batches(
    buffer: bytes | memoryview, *, allow_partial_tail: bool = False, crc_checked: bool = False
) -> Iterator[RecordBatch]:
    """Each batch of a buffer of consecutive batches, validated.

    With ``allow_partial_tail`` a last incomplete batch (as a fetch cut at a byte
    limit may return) ends the iteration instead of raising. ``crc_checked``: as
    ``RecordBatch``'s (the buffer came from a ``DataLog.read``).
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
        batch = RecordBatch(buffer, position, crc_checked=crc_checked)
        yield batch
        position += batch.header.size_bytes


def split_batches(buffer: bytes | memoryview) -> Iterator[memoryview]:
    """Each batch of ``buffer`` as a view, split by the length fields alone (no CRC check):
    for a caller that hands every batch to a checker anyway (a follower's log append).
    A buffer that does not end on a batch boundary raises CorruptBatchError."""
    view = memoryview(buffer)
    position, end = 0, len(view)
    while position < end:
        _, batch_length = read_length_prefix(view, position)
        batch_end = position + LENGTH_PREFIX_BYTES + batch_length
        if batch_end > end:
            raise CorruptBatchError(
                f"the last batch needs {batch_end - position} bytes, {end - position} remain: "
                "the buffer was cut inside a batch",
                position,
            )
        yield view[position:batch_end]
        position = batch_end
