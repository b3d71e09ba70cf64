"""Batch read: ``spark.read.format("twinlog")...load()``.

    driver, planning worker  partitions(): resolve the offsets once (planning.py) and
                             return one OffsetRange per partition (or more, with
                             minPartitions)
    each task                read(range): fetch the range in large chunks
                             (fetchMaxBytes) and yield pyarrow.RecordBatches of up to
                             ROWS_PER_ARROW_BATCH rows or about BYTES_PER_ARROW_BATCH,
                             never per-row tuples

``pushFilters`` is deliberately not implemented: in PySpark 4.3 a reader that
pushes filters gives wrong results when one DataFrame is queried with and then
without a filter. Narrow a read with the offset and subscription options, as
with Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from twinlog.connectors.spark.log_access import open_access
from twinlog.connectors.spark.planning import plan_batch
from twinlog.connectors.spark.ranges import OffsetRange
from twinlog.connectors.spark.read_settings import ReadSettings
from twinlog.connectors.spark.record_columns import ColumnBuilder
from twinlog.connectors.spark.schema import arrow_schema
from twinlog.connectors.spark.worker_memory import keep_freed_memory_in_this_worker

if TYPE_CHECKING:
    import pyarrow

# Spark's own default (spark.sql.execution.arrow.maxRecordsPerBatch): big enough to
# amortise the per-batch cost, small enough to keep a task's memory flat.
ROWS_PER_ARROW_BATCH = 10_000
# Records bytes (decompressed) per Arrow batch: a batch of large values stays a few MiB,
# which the JVM copies into rows while they are still in cache. A single record batch
# larger than this makes one Arrow batch of its own.
BYTES_PER_ARROW_BATCH = 4 * 1024 * 1024


def read_range(
    settings: ReadSettings, schema: StructType, partition: InputPartition
) -> Iterator[pyarrow.RecordBatch]:
    """The records of one offset range, as Arrow batches in the source schema (a task's work)."""
    if not isinstance(partition, OffsetRange):
        return  # PySpark plans one InputPartition(None) when there is nothing to read
    keep_freed_memory_in_this_worker()  # 8 MiB fetches, 4 MiB Arrow batches: see there
    access = open_access(settings.connection, settings.fetch_max_bytes)
    try:
        builder = ColumnBuilder(
            partition.topic,
            partition.partition,
            partition.from_offset,
            partition.until_offset,
            arrow_schema(schema),
            settings.include_headers,
        )
        for header, batch in access.batches(
            partition.topic_partition,
            partition.from_offset,
            partition.until_offset,
            settings.fail_on_data_loss,
        ):
            builder.add_batch(header, batch)
            if (
                len(builder) >= ROWS_PER_ARROW_BATCH
                or builder.section_bytes >= BYTES_PER_ARROW_BATCH
            ):
                yield builder.flush()
        if len(builder):
            yield builder.flush()
    finally:
        access.close()


class TwinlogBatchReader(DataSourceReader):
    """Made on the driver; pickled to every task. Holds only settings (no connection)."""

    def __init__(self, settings: ReadSettings, schema: StructType) -> None:
        self.settings = settings
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        access = open_access(self.settings.connection, self.settings.fetch_max_bytes)
        try:
            return list(plan_batch(self.settings, access))
        finally:
            access.close()

    def read(self, partition: InputPartition) -> Iterator[pyarrow.RecordBatch]:
        return read_range(self.settings, self.schema, partition)
