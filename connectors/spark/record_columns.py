"""Record batches (twinlog's bytes) to columns, then to one ``pyarrow.RecordBatch``.

This is the read path's hot loop: every record of a query passes through
``ColumnBuilder.add_batch`` once. It decodes with the engine's one record
decoder, ``twinlog.engine.records.record_decoder.decode_records``, which fills
one list per field without building a ``Record`` per row; a batch wholly inside
the builder's offset range is decoded straight into the builder's lists.

Batches arrive validated (CRC checked by ``twinlog.engine.records.batch_reader`` or
``twinlog.engine.log.LogReader``), so a malformed records section means a producer
bug (or data written before the broker checked records at the door); it raises
InvalidRecordError (naming the topic-partition, the batch's offset, the offset to
read from to skip it, the record and the byte), never IndexError, and refuses
exactly what ``RecordBatch.records()`` refuses.

Thread rule: a builder belongs to one task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinlog.connectors.spark.schema import TIMESTAMP_TYPE_CREATE_TIME
from twinlog.engine.base.errors import CorruptBatchError, InvalidRecordError
from twinlog.engine.records.batch_format import RECORDS_OFFSET, BatchHeader
from twinlog.engine.records.compression import decompress
from twinlog.engine.records.record_decoder import RecordColumns, decode_records

if TYPE_CHECKING:
    import pyarrow

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
        self.columns = RecordColumns()

    def __len__(self) -> int:
        return len(self.columns)

    def add_batch(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        """Decode the records of ``batch`` (whole batch bytes) that lie in [from, until)."""
        low, high = self.from_offset, self.until_offset
        if header.next_offset <= low or header.base_offset >= high:
            return
        rows_before = len(self.columns)
        try:
            section = decompress(
                header.codec, memoryview(batch)[RECORDS_OFFSET : header.size_bytes]
            )
            if low <= header.base_offset and header.next_offset <= high:
                decode_records(section, header, self.columns)
            else:
                # The range starts or ends inside this batch: every record is decoded
                # (and so checked, as any reader checks it), then those in range kept.
                decoded = decode_records(section, header)
                kept = [
                    index for index, offset in enumerate(decoded.offsets) if low <= offset < high
                ]
                self.columns.extend_from(decoded, kept)
        except CorruptBatchError as error:
            self.columns.truncate(rows_before)  # a batch that does not decode adds no row
            raise InvalidRecordError(
                f"{self.topic}-{self.partition}: the batch at offset {header.base_offset} "
                f"holds a record that does not decode ({error}); read from offset "
                f"{header.next_offset} on to skip it",
                topic=self.topic,
                partition=self.partition,
                offset=header.base_offset,
                record_index=getattr(error, "record_index", None),
                next_offset=header.next_offset,
            ) from None

    def flush(self) -> pyarrow.RecordBatch:
        """The records so far as one Arrow batch (in the source schema), and start afresh."""
        import pyarrow
        import pyarrow.compute

        columns = self.columns
        count = len(columns)
        milliseconds = pyarrow.array(columns.timestamps_ms, pyarrow.int64())
        microseconds = pyarrow.compute.multiply(milliseconds, MICROSECONDS_PER_MILLISECOND)
        arrays = [
            pyarrow.array(columns.keys, pyarrow.binary()),
            pyarrow.array(columns.values, pyarrow.binary()),
            pyarrow.array([self.topic] * count, pyarrow.string()),
            pyarrow.array([self.partition] * count, pyarrow.int32()),
            pyarrow.array(columns.offsets, pyarrow.int64()),
            microseconds.cast(self.arrow_schema.field("timestamp").type),
            pyarrow.array([TIMESTAMP_TYPE_CREATE_TIME] * count, pyarrow.int32()),
        ]
        if self.include_headers:
            headers = [
                [{"key": key, "value": value} for key, value in record_headers]
                for record_headers in columns.headers
            ]
            arrays.append(pyarrow.array(headers, self.arrow_schema.field("headers").type))
        batch = pyarrow.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
        self.columns = RecordColumns()
        return batch
