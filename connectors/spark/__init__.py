"""twinlog for Apache Spark (PySpark 4.3's Python Data Source API).

Register once per SparkSession, then use it like Spark's Kafka source and sink:

    from twinlog.connectors.spark import register
    register(spark)  # = spark.dataSource.register(TwinlogDataSource)

    df = (spark.read.format("twinlog").option("servers", "127.0.0.1:7070")
          .option("subscribe", "orders").load())
    df.write.format("twinlog").option("servers", "127.0.0.1:7070").option("topic", "out").save()

PySpark registers Python data sources automatically only from top-level modules
named ``pyspark_*`` that define ``DefaultSource`` (pyspark/sql/worker/
lookup_data_sources.py), so a ``pyspark_twinlog`` module re-exporting
``TwinlogDataSource`` as ``DefaultSource`` would make this call unnecessary.

Files, one concept each: options/read_settings/write_settings (options),
offsets (offset specs and JSON), subscription, log_access (broker or data
directory), planning (driver-side offsets), ranges (splitting, rate limits),
record_columns (bytes to Arrow; sections, arrow_records and arrow_slices its
fast path), reader / stream_reader, transaction /
task_sender / writer / stream_writer / sink_progress (exactly-once writes),
source (the DataSource).

The floor above the Kafka listener and the clients: it reads and writes through
``rpc.client`` (a server, a cluster, or an embedded ``Broker``) and can read a data
directory's logs without a broker (``engine.log``'s ``LogReader``). Only ``rpc.cli``
imports it (``twinlog demo`` ends by reading with it). docs/spark.md has every option.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinlog.connectors.spark.errors import DataLossError, OptionError
from twinlog.connectors.spark.source import SHORT_NAME, TwinlogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make ``format("twinlog")`` known to ``spark`` (call once per session)."""
    spark.dataSource.register(TwinlogDataSource)


__all__ = ["SHORT_NAME", "DataLossError", "OptionError", "TwinlogDataSource", "register"]
