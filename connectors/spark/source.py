"""``TwinlogDataSource``: the class Spark instantiates for ``format("twinlog")``.

Spark creates it (and calls the methods below) in short-lived Python workers
on the driver, with the query's options; each method parses and checks the
options it needs, so a mistake fails the query before a task runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from twinlog.connectors.spark.options import option_value
from twinlog.connectors.spark.read_settings import parse_read_settings
from twinlog.connectors.spark.reader import TwinlogBatchReader
from twinlog.connectors.spark.schema import source_schema
from twinlog.connectors.spark.stream_reader import TwinlogStreamReader
from twinlog.connectors.spark.stream_writer import TwinlogStreamWriter
from twinlog.connectors.spark.write_settings import parse_write_settings
from twinlog.connectors.spark.writer import TwinlogBatchWriter
from twinlog.engine.base.errors import InvalidConfigError

SHORT_NAME = "twinlog"


class TwinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def _include_headers(self) -> bool:
        text = {k.lower(): v for k, v in self.options.items()}.get("includeheaders")
        return text is not None and option_value("includeHeaders", text) is True

    def schema(self) -> StructType:
        return source_schema(self._include_headers())

    def _check_read_schema(self, schema: StructType) -> None:
        expected = source_schema(self._include_headers())
        if schema.simpleString() != expected.simpleString():
            raise InvalidConfigError(
                f"format('twinlog') has a fixed schema, {expected.simpleString()}; do not pass "
                f"one with .schema() (got {schema.simpleString()})"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_read_schema(schema)
        return TwinlogBatchReader(parse_read_settings(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_read_schema(schema)
        return TwinlogStreamReader(parse_read_settings(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise InvalidConfigError(
                "format('twinlog') appends to logs; it cannot overwrite them. Use "
                "mode('append') (or drop mode('overwrite'))"
            )
        return TwinlogBatchWriter.begin(parse_write_settings(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Complete output mode asks to "overwrite"; like Kafka's sink, every micro-batch
        # then appends the whole result.
        return TwinlogStreamWriter(parse_write_settings(self.options, schema))
