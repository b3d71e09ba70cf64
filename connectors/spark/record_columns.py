"""Record batches (twinlog's bytes) to columns, then to one ``pyarrow.RecordBatch``.

This is the read path's hot loop: every record of a query passes through
``ColumnBuilder.add_batch`` once. It decodes the records section laid out in
``engine/records/batch_format.py`` straight into column lists, without building a
``Record`` per row, and with the one-byte varint (most lengths, deltas and
counts) decoded inline; ``twinlog.engine.records.varint.decode_varint`` takes the rest. It is
about 3x faster than ``twinlog.engine.records.batch_reader.RecordBatch.records()`` on 1 KiB
values, which matters because a Spark task spends most of its time here.

Batches arrive validated (CRC checked by ``twinlog.engine.records.batch_reader`` or
``twinlog.engine.log.LogReader``), so a malformed records section means a producer
bug; it still raises CorruptBatchError, never IndexError.

Thread rule: a builder belongs to one task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinlog.connectors.spark.schema import TIMESTAMP_TYPE_CREATE_TIME
from twinlog.engine.base.errors import CorruptBatchError
from twinlog.engine.records.batch_format import RECORDS_OFFSET, BatchHeader
from twinlog.engine.records.compression import decompress
from twinlog.engine.records.varint import VARINT_BYTES_MAX, decode_varint

if TYPE_CHECKING:
    import pyarrow

Header = tuple[str, bytes | None]
MICROSECONDS_PER_MILLISECOND = 1000


class ColumnBuilder:
    """Accumulates the records of one topic-partition's offset range; ``flush`` makes an Arrow batch."""

    def __init__(
        self,
        topic: str,
        partition: int,
        from_offset: int,
        until_offset: int,
        arrow_schema: pyarrow.Schema,
        include_headers: bool,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset
        self.arrow_schema = arrow_schema
        self.include_headers = include_headers
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps_ms: list[int] = []
        self.headers: list[list[dict[str, object]]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        """Decode the records of ``batch`` (whole batch bytes) that lie in [from, until)."""
        if header.next_offset <= self.from_offset or header.base_offset >= self.until_offset:
            return
        section = decompress(header.codec, memoryview(batch)[RECORDS_OFFSET : header.size_bytes])
        try:
            self._decode(bytes(section), header)
        except IndexError:
            raise CorruptBatchError(
                f"batch at offset {header.base_offset} of {self.topic}-{self.partition}: its "
                "records section ends inside a record"
            ) from None

    def _decode(self, section: bytes, header: BatchHeader) -> None:
        # Locals, not attributes, inside the loop: this is the hot path.
        keys, values, offsets, stamps = self.keys, self.values, self.offsets, self.timestamps_ms
        headers = self.headers if self.include_headers else None
        low, high = self.from_offset, self.until_offset
        base_offset, first_timestamp_ms = header.base_offset, header.first_timestamp_ms
        position = 0
        end = len(section)
        for index in range(header.record_count):
            byte = section[position]
            if byte < 0x80:
                length, position = (byte >> 1) ^ -(byte & 1), position + 1
            elif section[position + 1] < 0x80:  # two bytes: lengths up to 8 KiB
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                length, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                length, position = decode_varint(section, position, VARINT_BYTES_MAX)
            record_end = position + length
            if length < 0 or record_end > end:
                raise CorruptBatchError(
                    f"record {index} of the batch at offset {base_offset} says {length} bytes, "
                    f"{end - position} remain"
                )
            position += 1  # record attributes, unused
            byte = section[position]
            if byte < 0x80:
                timestamp_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            elif section[position + 1] < 0x80:  # deltas up to 8 s
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                timestamp_delta, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                timestamp_delta, position = decode_varint(section, position)
            byte = section[position]
            if byte < 0x80:
                offset_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                offset_delta, position = decode_varint(section, position, VARINT_BYTES_MAX)
            offset = base_offset + offset_delta
            if offset >= high:
                return  # offsets grow within a batch: the rest lie past the range too
            if offset < low:
                position = record_end  # before the range: skip without decoding the rest
                continue
            byte = section[position]
            if byte < 0x80:
                size, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                size, position = decode_varint(section, position, VARINT_BYTES_MAX)
            if size < 0:
                keys.append(None)
            else:
                keys.append(section[position : position + size])
                position += size
            byte = section[position]
            if byte < 0x80:
                size, position = (byte >> 1) ^ -(byte & 1), position + 1
            elif section[position + 1] < 0x80:
                raw = (byte & 0x7F) | (section[position + 1] << 7)
                size, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                size, position = decode_varint(section, position, VARINT_BYTES_MAX)
            if size < 0:
                values.append(None)
            else:
                values.append(section[position : position + size])
                position += size
            byte = section[position]
            if byte < 0x80:
                count, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                count, position = decode_varint(section, position, VARINT_BYTES_MAX)
            if count:
                decoded, position = _decode_headers(section, position, count, record_end)
                if headers is not None:
                    headers.append([{"key": k, "value": v} for k, v in decoded])
            elif headers is not None:
                headers.append([])
            if position != record_end or count < 0:
                raise CorruptBatchError(
                    f"record {index} of the batch at offset {base_offset} says it ends at byte "
                    f"{record_end} of the records section; its fields end at {position}"
                )
            offsets.append(offset)
            stamps.append(first_timestamp_ms + timestamp_delta)
        if position != end:
            raise CorruptBatchError(
                f"the batch at offset {base_offset} has {end - position} bytes after its "
                f"{header.record_count} records"
            )

    def flush(self) -> pyarrow.RecordBatch:
        """The records so far as one Arrow batch (in the source schema), and start afresh."""
        import pyarrow
        import pyarrow.compute

        count = len(self.offsets)
        milliseconds = pyarrow.array(self.timestamps_ms, pyarrow.int64())
        microseconds = pyarrow.compute.multiply(milliseconds, MICROSECONDS_PER_MILLISECOND)
        arrays = [
            pyarrow.array(self.keys, pyarrow.binary()),
            pyarrow.array(self.values, pyarrow.binary()),
            pyarrow.array([self.topic] * count, pyarrow.string()),
            pyarrow.array([self.partition] * count, pyarrow.int32()),
            pyarrow.array(self.offsets, pyarrow.int64()),
            microseconds.cast(self.arrow_schema.field("timestamp").type),
            pyarrow.array([TIMESTAMP_TYPE_CREATE_TIME] * count, pyarrow.int32()),
        ]
        if self.include_headers:
            arrays.append(pyarrow.array(self.headers, self.arrow_schema.field("headers").type))
        batch = pyarrow.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
        self.keys, self.values, self.offsets, self.timestamps_ms, self.headers = [], [], [], [], []
        return batch


def _decode_headers(
    section: bytes, position: int, count: int, record_end: int
) -> tuple[list[Header], int]:
    if count > record_end - position:
        raise CorruptBatchError(
            f"a record says it has {count} headers in {record_end - position} bytes"
        )
    decoded: list[Header] = []
    for _ in range(count):
        size, position = decode_varint(section, position, VARINT_BYTES_MAX)
        if size < 0:
            raise CorruptBatchError("a record has a header with a null key")
        try:
            key = section[position : position + size].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptBatchError("a record has a header key that is not UTF-8") from None
        position += size
        size, position = decode_varint(section, position, VARINT_BYTES_MAX)
        if size < 0:
            decoded.append((key, None))
        else:
            decoded.append((key, section[position : position + size]))
            position += size
    return decoded, position
