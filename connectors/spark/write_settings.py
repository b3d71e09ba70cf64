"""Write options and the input DataFrame's columns, checked on the driver before any task runs.

Columns, as in Spark's Kafka sink:

    value      binary or string, required (may be null)
    key        binary or string, optional
    topic      string, optional; required unless the topic option is set, which wins
    partition  int, optional; else Kafka's rule: murmur2 of the key, or sticky for no key
    headers    array<struct<key: string, value: binary>>, optional

Other columns are ignored, as Kafka's sink ignores them.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.options import (
    BATCH_BYTES_DEFAULT,
    COMPRESSION_LEVEL_DEFAULT,
    TRANSACTION_TIMEOUT_MS_DEFAULT,
    WRITE_OPTIONS,
    Connection,
    Options,
    parse_connection,
)
from twinlog.engine.base.errors import InvalidConfigError


@dataclass(frozen=True)
class WriteSettings:
    connection: Connection
    topic: str | None  # the topic option; None: the topic column says
    columns: tuple[
        str, ...
    ]  # the input columns the sink uses, of key/value/topic/partition/headers
    transaction_timeout_ms: int
    batch_bytes: int
    compression: str
    sink_id: str | None  # streaming: names the query's progress in the broker
    compression_level: int = COMPRESSION_LEVEL_DEFAULT  # zstd's level


def _type_error(column: str, found: DataType, wanted: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"format('twinlog') column {column!r} is {found.simpleString()}; it must be {wanted} "
        "(cast it, e.g. df.selectExpr('CAST(x AS BINARY) AS value'))"
    )


def check_columns(schema: StructType, topic_option: str | None) -> tuple[str, ...]:
    types = {field.name: field.dataType for field in schema.fields}
    if "value" not in types:
        raise InvalidConfigError(
            "format('twinlog') needs a column named value (binary or string); the DataFrame "
            f"has {', '.join(types) or 'no columns'}"
        )
    for column in ("key", "value"):
        if column in types and not isinstance(types[column], BinaryType | StringType):
            raise _type_error(column, types[column], "binary or string")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise _type_error("topic", types["topic"], "string")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise _type_error("partition", types["partition"], "int")
    if "headers" in types:
        headers = types["headers"]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        if not (
            isinstance(element, StructType)
            and [f.name for f in element.fields] == ["key", "value"]
            and isinstance(element.fields[0].dataType, StringType)
            and isinstance(element.fields[1].dataType, BinaryType)
        ):
            raise _type_error("headers", headers, "array<struct<key:string,value:binary>>")
    if topic_option is None and "topic" not in types:
        raise OptionError(
            "topic",
            "is required: set .option('topic', 'orders'), or give the DataFrame a topic column",
        )
    return tuple(c for c in ("key", "value", "topic", "partition", "headers") if c in types)


def normalised_checkpoint(location: str) -> str:
    """One spelling of a checkpoint location, so one checkpoint gets one default sinkId.

    Spark qualifies the location with Hadoop's Path, so "/c", "/c/", "file:/c",
    "file:///c" and "/a/../c" all reach the same checkpoint (and the same query
    id); their sinkIds must be equal too, or the sink would look for its progress
    under a name it never committed, and a replayed micro-batch would be written
    again. Local paths become absolute and normalised (a relative one resolves
    against the driver's working directory, as Spark resolves it); other schemes
    (hdfs://, s3a://) keep their authority and lose repeated and trailing slashes.
    Symbolic links are not resolved: two paths through different links name two
    sinks (set sinkId to share one).
    """
    text = location.strip()
    if text.startswith("file:"):
        text = text[len("file:") :]
        if text.startswith("//"):  # file://[host]/path: an empty or local host
            host, _, rest = text[2:].partition("/")
            if host not in ("", "localhost"):
                return "file://" + host + "/" + posixpath.normpath("/" + rest).lstrip("/")
            text = "/" + rest
    elif "://" in text:
        scheme, _, rest = text.partition("://")
        authority, _, path = rest.partition("/")
        return f"{scheme.lower()}://{authority}{posixpath.normpath('/' + path)}"
    return os.path.normpath(os.path.abspath(text))


def sink_id_of(options: Options) -> str | None:
    """The streaming sink's stable name: sinkId, else derived from the checkpoint location.

    The checkpoint location is what stays the same when a query restarts (the run id
    does not). Spark's query id would do too, but the transactional id is needed in
    the driver's Python workers, which Spark never tells it: so the default is a hash
    of the location, spelled one way.
    """
    given = options.text("sinkId")
    if given is not None:
        if not given.strip():
            raise OptionError("sinkId", "is empty; name the query, e.g. orders-enricher")
        return given.strip()
    checkpoint = options.text("checkpointLocation")
    if checkpoint and checkpoint.strip():
        location = normalised_checkpoint(checkpoint)
        return "checkpoint-" + hashlib.sha256(location.encode("utf-8")).hexdigest()[:24]
    return None


def parse_write_settings(raw: Mapping[str, str], schema: StructType) -> WriteSettings:
    options = Options(raw, WRITE_OPTIONS)
    topic = options.text("topic")
    if topic is not None and not topic.strip():
        raise OptionError(
            "topic", "is empty; name a topic, or drop the option to use a topic column"
        )
    timeout_ms = options.integer("transactionTimeoutMs", TRANSACTION_TIMEOUT_MS_DEFAULT)
    batch_bytes = options.integer("batchBytes", BATCH_BYTES_DEFAULT)
    level = options.integer("compressionLevel", COMPRESSION_LEVEL_DEFAULT)
    assert timeout_ms is not None and batch_bytes is not None and level is not None
    compression = options.choice("compression", "zstd")
    return WriteSettings(
        connection=parse_connection(options, allow_path=False),
        topic=topic.strip() if topic else None,
        columns=check_columns(schema, topic),
        transaction_timeout_ms=timeout_ms,
        batch_bytes=batch_bytes,
        compression=compression,
        sink_id=sink_id_of(options),
        compression_level=level,
    )
