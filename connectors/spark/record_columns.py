"""Record batches (twinlog's bytes) to one ``pyarrow.RecordBatch`` in the source schema.

This is the read path's hot loop: every record of a query passes through a
``ColumnBuilder``. A batch wholly inside the builder's offset range is
decompressed at once and kept; ``flush`` decodes all those kept so far in one
go with the compiled walk (``arrow_records.arrays_of_sections``: each key and value
copied once, into Arrow's layout) or, without it, ``arrow_records.decode_sections``
(Arrow compute: no bytes object, and one short loop step, per record). Whatever
that fast path declines (headers, rare varint sizes, malformed records), and the
batch at either end of the range, is decoded with the engine's one record
decoder, ``twinlog.engine.records.record_decoder.decode_records``.

Batches arrive validated (CRC checked by ``twinlog.engine.records.batch_reader`` or
``twinlog.engine.log.LogReader``), so a malformed records section means a producer
bug (or data written before the broker checked records at the door); it raises
InvalidRecordError (naming the topic-partition, the batch's offset, the offset to
read from to skip it, the record and the byte), never IndexError, and refuses
exactly what ``RecordBatch.records()`` refuses: from ``add_batch`` for a batch
that does not decompress or that the range cuts, from ``flush`` for the others.

Thread rule: a builder belongs to one task.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from twinlog.connectors.spark.arrow_records import (
    SectionArrays,
    arrays_of_sections,
    decode_sections,
)
from twinlog.connectors.spark.schema import TIMESTAMP_TYPE_CREATE_TIME
from twinlog.connectors.spark.sections import records_section
from twinlog.engine.records import column_buffers
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.record_decoder import RecordColumns, decode_records
from twinlog.engine.records.undecodable_batch import naming_the_batch

if TYPE_CHECKING:
    import pyarrow

MICROSECONDS_PER_MILLISECOND = 1000

# A run of whole batches waiting for flush: (header, decompressed records section).
WholeBatches = list[tuple[BatchHeader, bytes | memoryview]]


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
        # In log order: runs of whole batches (decoded at flush) and the records of cut
        # batches (decoded at add_batch).
        self.segments: list[WholeBatches | RecordColumns] = []
        self.rows = 0
        self.section_bytes = 0

    def __len__(self) -> int:
        return self.rows

    def add_batch(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        """Take the records of ``batch`` (whole batch bytes) that lie in [from, until)."""
        low, high = self.from_offset, self.until_offset
        if header.next_offset <= low or header.base_offset >= high:
            return
        with self._naming_the_batch(header):
            section = records_section(header, batch)
            if low <= header.base_offset and header.next_offset <= high:
                last = self.segments[-1] if self.segments else None
                if isinstance(last, list):
                    last.append((header, section))
                else:
                    self.segments.append([(header, section)])
                self.rows += header.record_count
                self.section_bytes += len(section)
                return
            # The range starts or ends inside this batch: every record is decoded
            # (and so checked, as any reader checks it), then those in range kept.
            decoded = decode_records(section, header)
            kept = [index for index, offset in enumerate(decoded.offsets) if low <= offset < high]
            columns = RecordColumns()
            columns.extend_from(decoded, kept)
            self.segments.append(columns)
            self.rows += len(columns)

    def flush(self) -> pyarrow.RecordBatch:
        """The records so far as one Arrow batch (in the source schema), and start afresh.

        Raises InvalidRecordError if a batch taken whole holds a malformed record; the
        builder is empty afterwards either way."""
        import pyarrow

        segments, self.segments, self.rows, self.section_bytes = self.segments, [], 0, 0
        parts = [
            self._whole_arrays(segment)
            if isinstance(segment, list)
            else self._decoded_arrays(segment)
            for segment in segments
        ]
        if len(parts) == 1:
            arrays = parts[0]
        elif parts:
            arrays = [pyarrow.concat_arrays(column) for column in zip(*parts, strict=True)]
        else:
            arrays = self._decoded_arrays(RecordColumns())
        return self._batch(arrays)

    # --- decoding ------------------------------------------------------------------------

    def _naming_the_batch(self, header: BatchHeader) -> AbstractContextManager[None]:
        return naming_the_batch(self.topic, self.partition, header)

    def _whole_arrays(self, batches: WholeBatches) -> list[pyarrow.Array]:
        decoded: SectionArrays | None
        if column_buffers.COMPILED:
            decoded = arrays_of_sections(batches)
        else:
            sections: list[tuple[BatchHeader, int, int]] = []
            position = 0
            for header, section in batches:
                sections.append((header, position, position + len(section)))
                position += len(section)
            decoded = decode_sections(b"".join(section for _, section in batches), sections)
        if decoded is not None:
            return self._fast_arrays(decoded)
        columns = RecordColumns()
        for header, section in batches:
            with self._naming_the_batch(header):
                decode_records(section, header, columns)
        return self._decoded_arrays(columns)

    def _fast_arrays(self, decoded: SectionArrays) -> list[pyarrow.Array]:
        """[key, value, offset, timestamp ms(, headers)] of records without headers."""
        import pyarrow

        arrays = [decoded.keys, decoded.values, decoded.offsets, decoded.timestamps_ms]
        if self.include_headers:
            no_headers = pyarrow.repeat(
                pyarrow.scalar(0, pyarrow.int32()), len(decoded.offsets) + 1
            )
            headers_type = self.arrow_schema.field("headers").type
            arrays.append(
                pyarrow.ListArray.from_arrays(
                    no_headers, pyarrow.array([], headers_type.value_type), type=headers_type
                )
            )
        return arrays

    def _decoded_arrays(self, columns: RecordColumns) -> list[pyarrow.Array]:
        """[key, value, offset, timestamp ms(, headers)] of records ``decode_records`` made."""
        import pyarrow

        arrays = [
            pyarrow.array(columns.keys, pyarrow.binary()),
            pyarrow.array(columns.values, pyarrow.binary()),
            pyarrow.array(columns.offsets, pyarrow.int64()),
            pyarrow.array(columns.timestamps_ms, pyarrow.int64()),
        ]
        if self.include_headers:
            headers = [
                [{"key": key, "value": value} for key, value in record_headers]
                for record_headers in columns.headers
            ]
            arrays.append(pyarrow.array(headers, self.arrow_schema.field("headers").type))
        return arrays

    def _batch(self, arrays: list[pyarrow.Array]) -> pyarrow.RecordBatch:
        import pyarrow
        import pyarrow.compute

        keys, values, offsets, timestamps_ms, *headers = arrays
        count = len(offsets)
        microseconds = pyarrow.compute.multiply(
            timestamps_ms, pyarrow.scalar(MICROSECONDS_PER_MILLISECOND, pyarrow.int64())
        )
        columns = [
            keys,
            values,
            pyarrow.repeat(pyarrow.scalar(self.topic, pyarrow.string()), count),
            pyarrow.repeat(pyarrow.scalar(self.partition, pyarrow.int32()), count),
            offsets,
            microseconds.cast(self.arrow_schema.field("timestamp").type),
            pyarrow.repeat(pyarrow.scalar(TIMESTAMP_TYPE_CREATE_TIME, pyarrow.int32()), count),
            *headers,
        ]
        return pyarrow.RecordBatch.from_arrays(columns, schema=self.arrow_schema)
