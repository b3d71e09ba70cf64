"""The rows the source yields: Spark's Kafka source schema, and its Arrow twin.

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]   with includeHeaders=true

``timestampType`` is always 0 (CreateTime): a twinlog batch carries the
producer's timestamps. Tasks yield ``pyarrow.RecordBatch``es, which PySpark
accepts only if their schema equals the Arrow schema it derives from the
Spark schema field for field (types, nullability, timezone), so the Arrow
schema is derived by PySpark's own function rather than written twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow

TIMESTAMP_TYPE_CREATE_TIME = 0

HEADER_TYPE = StructType(
    [StructField("key", StringType(), True), StructField("value", BinaryType(), True)]
)


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE, True), True))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pyarrow.Schema:
    """The Arrow schema PySpark expects for ``schema`` (see plan_data_source_read.py)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
