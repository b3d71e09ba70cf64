"""The connector's pure parts, without a SparkSession: options, offsets, ranges, decoding."""

from __future__ import annotations

import itertools
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pyarrow
import pytest
from batch_support import batch_around
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlog.connectors.spark.errors import DataLossError, OptionError
from twinlog.connectors.spark.log_access import BrokerLogAccess, DirectoryLogAccess
from twinlog.connectors.spark.offsets import (
    SpecKind,
    check_names_partitions,
    ending_spec,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_json,
    starting_spec,
)
from twinlog.connectors.spark.options import READ_OPTIONS, WRITE_OPTIONS, Options
from twinlog.connectors.spark.ranges import (
    OffsetRange,
    ranges_between,
    rate_limit,
    split_for_min_partitions,
)
from twinlog.connectors.spark.read_settings import parse_read_settings
from twinlog.connectors.spark.record_columns import ColumnBuilder
from twinlog.connectors.spark.schema import arrow_schema, source_schema
from twinlog.connectors.spark.subscription import parse_subscription
from twinlog.connectors.spark.write_settings import check_columns, parse_write_settings
from twinlog.engine.base.errors import CorruptBatchError, OffsetOutOfRangeError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_builder import RecordBatchBuilder, encode_record
from twinlog.engine.records.batch_reader import RecordBatch
from twinlog.engine.records.compression import CODEC_BY_NAME
from twinlog.engine.records.rewrite import iter_record_spans, records_section

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def read_options(**options: str) -> Options:
    return Options(options, READ_OPTIONS)


# --- options ---------------------------------------------------------------------------


def test_options_are_case_insensitive_and_unknown_ones_are_named() -> None:
    options = read_options(STARTINGOFFSETS="earliest")
    assert options.text("startingOffsets") == "earliest"
    with pytest.raises(OptionError, match="startingoffset: unknown option"):
        read_options(startingOffset="earliest")
    with pytest.raises(OptionError, match="twinlog calls it servers"):
        read_options(**{"kafka.bootstrap.servers": "x"})
    # topic is the sink's option; a read names its topics otherwise.
    with pytest.raises(OptionError, match="topic: is the write option") as raised:
        read_options(topic="orders")
    assert "with subscribe (e.g. orders,payments), assign or subscribePattern" in str(raised.value)
    assert "calls it subscribe" not in str(raised.value)
    with pytest.raises(OptionError, match="includeHeaders: is 'maybe', expected true or false"):
        read_options(includeHeaders="maybe").boolean("includeHeaders", False)


def test_exactly_one_of_servers_and_path() -> None:
    base = {"subscribe": "orders"}
    with pytest.raises(OptionError, match="servers: is required"):
        parse_read_settings(base, streaming=False)
    with pytest.raises(OptionError, match="not both"):
        parse_read_settings({**base, "servers": "h:1", "path": "/d"}, streaming=False)
    settings = parse_read_settings({**base, "servers": "h:1,h:2"}, streaming=False)
    assert settings.connection.server == "h:1"


def test_typed_options_are_read_by_their_rules() -> None:
    read = parse_read_settings(
        {
            "servers": "h:1",
            "subscribe": "orders",
            "fetchMaxBytes": " 2048 ",
            "failOnDataLoss": "FALSE",
            "includeHeaders": "true",
            "minPartitions": "3",
            "maxOffsetsPerTrigger": "100",
            "startingTimestamp": "0",
            "startingOffsetsByTimestampStrategy": "Latest",
            "requestTimeoutMs": "5000",
            "tls": "True",
        },
        streaming=True,
    )
    assert read.fetch_max_bytes == 2048 and read.min_partitions == 3
    assert read.fail_on_data_loss is False and read.include_headers is True
    assert read.max_offsets_per_trigger == 100
    assert read.starting.timestamp_ms == 0 and read.timestamp_strategy == "latest"
    assert read.connection.connection_options.request_timeout_ms == 5000
    assert read.connection.connection_options.tls is True


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fetchMaxBytes": "100"}, "twinlog option fetchMaxBytes: is 100, expected 1024 or more"),
        ({"fetchMaxBytes": "8MiB"}, "fetchMaxBytes: is '8MiB', expected an integer 1024 or more"),
        ({"minPartitions": "0"}, "twinlog option minPartitions: is 0, expected 1 or more"),
        ({"maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger: is -5, expected 1 or more"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss: is 'maybe', expected true or false"),
        ({"includeHeaders": ""}, "includeHeaders: is '', expected true or false"),
        ({"startingTimestamp": "-1"}, "startingTimestamp: is -1, expected 0 or more"),
        ({"startingTimestamp": "1.5"}, "startingTimestamp: is '1.5', expected an integer 0 or"),
        (
            {"startingOffsetsByTimestampStrategy": "first"},
            "twinlog option startingOffsetsByTimestampStrategy: is 'first', expected one of "
            "error, latest",
        ),
        ({"requestTimeoutMs": "0"}, "twinlog option requestTimeoutMs: is 0, expected 1 or more"),
        ({"tls": "on"}, "twinlog option tls: is 'on', expected true or false"),
    ],
)
def test_a_typed_read_option_is_refused_naming_it_as_documented(
    options: dict[str, str], message: str
) -> None:
    # Spark hands the options over lower-cased; the refusal spells them as the docs do.
    raw = {"servers": "h:1", "subscribe": "orders"} | {k.lower(): v for k, v in options.items()}
    with pytest.raises(OptionError, match=re.escape(message)) as refused:
        parse_read_settings(raw, streaming=True)
    assert refused.value.option == next(iter(options))


def test_the_schema_reads_include_headers_by_its_rule() -> None:
    from twinlog.connectors.spark.source import TwinlogDataSource

    assert "headers" in TwinlogDataSource({"includeheaders": " TRUE "}).schema().fieldNames()
    assert "headers" not in TwinlogDataSource({}).schema().fieldNames()
    with pytest.raises(OptionError, match="includeHeaders: is 'maybe', expected true or false"):
        TwinlogDataSource({"includeheaders": "maybe"}).schema()


def test_every_option_rule_is_a_documented_option_s() -> None:
    from twinlog.connectors.spark.options import OPTION_RULES
    from twinlog.rpc.client.connection_options import RULES as CONNECTION_RULES

    assert set(OPTION_RULES) <= set(READ_OPTIONS) | set(WRITE_OPTIONS)
    assert OPTION_RULES["requestTimeoutMs"] is CONNECTION_RULES.rules["request_timeout_ms"]
    assert OPTION_RULES["tls"] is CONNECTION_RULES.rules["tls"]


# --- offsets -----------------------------------------------------------------------------


def test_offset_json_round_trips_and_rejects_bad_shapes() -> None:
    parsed = parse_offsets_json("startingOffsets", '{"orders":{"0":23,"1":-2}}')
    assert parsed == {T0: 23, T1: -2}
    assert offsets_from_json(offsets_to_json(parsed)) == parsed
    assert json.dumps(offsets_to_json(parsed)) == '{"orders": {"0": 23, "1": -2}}'
    for bad, message in [
        ("[1]", "must be a JSON object"),
        ('{"orders":[0]}', "must map partitions to numbers"),
        ('{"orders":{"x":1}}', "is not a partition number"),
        ('{"orders":{"0":true}}', "is not a whole number"),
        ('{"orders":{"0":1.5}}', "is not a whole number"),
    ]:
        with pytest.raises(OptionError, match=message):
            parse_offsets_json("startingOffsets", bad)


def test_kafka_rules_for_batch_and_streaming_specs() -> None:
    assert starting_spec(read_options(), streaming=False).kind is SpecKind.EARLIEST
    assert starting_spec(read_options(), streaming=True).kind is SpecKind.LATEST
    assert ending_spec(read_options(), streaming=False).kind is SpecKind.LATEST  # type: ignore[union-attr]
    with pytest.raises(OptionError, match="cannot be latest in a batch"):
        starting_spec(read_options(startingOffsets="latest"), streaming=False)
    with pytest.raises(OptionError, match="-1 \\(latest\\) is not allowed"):
        starting_spec(read_options(startingOffsets='{"orders":{"0":-1}}'), streaming=False)
    with pytest.raises(OptionError, match="-2 \\(earliest\\) is not allowed"):
        ending_spec(read_options(endingOffsets='{"orders":{"0":-2}}'), streaming=False)
    with pytest.raises(OptionError, match="offsets must be >= 0, or -2"):
        starting_spec(read_options(startingOffsets='{"orders":{"0":-3}}'), streaming=False)
    with pytest.raises(OptionError, match="endingTimestamp: is for batch queries"):
        ending_spec(read_options(endingTimestamp="5"), streaming=True)
    # Kafka's precedence: timestamp, then ByTimestamp JSON, then offsets.
    both = read_options(startingTimestamp="7", startingOffsets="earliest")
    assert starting_spec(both, streaming=False).kind is SpecKind.TIMESTAMP


def test_a_json_spec_names_exactly_the_partitions_read() -> None:
    spec = starting_spec(read_options(startingOffsets='{"orders":{"0":1}}'), streaming=False)
    with pytest.raises(OptionError, match="leaves out orders-1"):
        check_names_partitions(spec, [T0, T1])
    check_names_partitions(spec, [T0])


def test_subscriptions() -> None:
    existing = {"orders": 2, "payments": 1, "__consumer_offsets": 4}
    subscribe = parse_subscription(read_options(subscribe="orders, payments"))
    assert subscribe.resolve(existing) == [T0, T1, TopicPartition("payments", 0)]
    assign = parse_subscription(read_options(assign='{"orders":[1]}'))
    assert assign.resolve(existing) == [T1]
    pattern = parse_subscription(read_options(subscribePattern=".*"))
    assert TopicPartition("__consumer_offsets", 0) not in pattern.resolve(existing)
    with pytest.raises(OptionError, match="orders-5 does not exist"):
        parse_subscription(read_options(assign='{"orders":[5]}')).resolve(existing)
    with pytest.raises(OptionError, match="got subscribe, assign"):
        parse_subscription(read_options(subscribe="a", assign='{"a":[0]}'))
    with pytest.raises(OptionError, match="not a valid regular expression"):
        parse_subscription(read_options(subscribePattern="("))


# --- ranges -------------------------------------------------------------------------------


def test_min_partitions_splits_in_proportion_and_evenly() -> None:
    ranges = [OffsetRange("orders", 0, 0, 900), OffsetRange("orders", 1, 100, 200)]
    split = split_for_min_partitions(ranges, 10)
    assert len(split) == 10
    assert [r.size for r in split] == [100] * 10
    assert split[0].from_offset == 0 and split[8].until_offset == 900
    assert split_for_min_partitions(ranges, 2) == ranges
    tiny = split_for_min_partitions([OffsetRange("t", 0, 0, 2)], 8)
    assert [r.size for r in tiny] == [1, 1]  # never an empty part
    # Halves round up, as Java's Math.round in Spark's KafkaOffsetRangeCalculator; Python's
    # round() would round 2.5 down to 2 and give 4 tasks for minPartitions=5.
    halves = split_for_min_partitions([OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 5)], 5)
    assert [(r.partition, r.size) for r in halves] == [
        (0, 1),
        (0, 2),
        (0, 2),
        (1, 1),
        (1, 2),
        (1, 2),
    ]
    # Ranges left whole leave the rest of minPartitions to the large ones (Spark's rule):
    # 1 + 1 whole, then 98 offsets share 10 - 2 = 8 parts (not round(98 / 100 * 10) = 10).
    skewed = [OffsetRange("t", 0, 0, 1), OffsetRange("t", 1, 0, 1), OffsetRange("t", 2, 0, 98)]
    assert [r.size for r in split_for_min_partitions(skewed, 10)] == [1, 1] + [12] * 6 + [13] * 2
    assert pickle.loads(pickle.dumps(split[3])) == split[3]


@given(
    sizes=st.lists(st.integers(0, 10_000), min_size=1, max_size=6),
    parts=st.integers(1, 40),
)
def test_split_ranges_cover_exactly_the_input(sizes: list[int], parts: int) -> None:
    ranges = [OffsetRange("t", i, 0, size) for i, size in enumerate(sizes) if size]
    split = split_for_min_partitions(ranges, parts)
    for whole in ranges:
        pieces = [r for r in split if r.partition == whole.partition]
        assert pieces[0].from_offset == whole.from_offset
        assert pieces[-1].until_offset == whole.until_offset
        assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(pieces))
        assert all(r.size > 0 for r in pieces)


def test_rate_limit_shares_by_backlog_like_kafka() -> None:
    start = {T0: 0, T1: 0}
    assert rate_limit(start, {T0: 900, T1: 100}, 100) == {T0: 90, T1: 10}
    assert rate_limit(start, {T0: 10, T1: 5}, 100) == {T0: 10, T1: 5}  # all fits
    limited = rate_limit(start, {T0: 100_000, T1: 1}, 10)
    assert limited[T1] == 1  # a share below one offset still takes one
    assert ranges_between({T0: 5}, {T0: 5, T1: 3}) == []  # new partitions need a start


# --- writes ------------------------------------------------------------------------------


def test_write_columns_follow_kafkas_sink() -> None:
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    def schema(**columns: object) -> StructType:
        return StructType([StructField(n, t, True) for n, t in columns.items()])  # type: ignore[arg-type]

    assert check_columns(schema(value=StringType(), extra=LongType()), "t") == ("value",)
    assert check_columns(
        schema(key=BinaryType(), value=BinaryType(), topic=StringType(), partition=IntegerType()),
        None,
    ) == ("key", "value", "topic", "partition")
    with pytest.raises(OptionError, match="topic: is required"):
        check_columns(schema(value=StringType()), None)
    with pytest.raises(Exception, match="column 'key' is bigint"):
        check_columns(schema(value=StringType(), key=LongType()), "t")
    settings = parse_write_settings(
        {"servers": "h:1", "topic": "t", "checkpointLocation": "/c"}, schema(value=StringType())
    )
    assert settings.sink_id and settings.sink_id.startswith("checkpoint-")
    assert settings.compression_level == 1  # zstd's fastest level: a write's largest cost
    with pytest.raises(OptionError, match="subscribe: unknown option"):
        Options({"subscribe": "x"}, WRITE_OPTIONS)
    base = {"servers": "h:1", "topic": "t"}
    leveled = parse_write_settings({**base, "compressionLevel": "19"}, schema(value=StringType()))
    assert leveled.compression_level == 19
    for wrong, expected in (
        ("0", "is 0, expected 1..22"),
        ("23", "is 23, expected 1..22"),
        ("fast", "is 'fast', expected an integer 1..22"),
    ):
        with pytest.raises(OptionError, match=re.escape(f"compressionLevel: {expected}")):
            parse_write_settings({**base, "compressionLevel": wrong}, schema(value=StringType()))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"transactionTimeoutMs": "999"},
            "twinlog option transactionTimeoutMs: is 999, expected 1000 or more",
        ),
        (
            {"batchBytes": "16777216"},
            "twinlog option batchBytes: is 16777216, expected 1024..8388608",
        ),
        ({"batchBytes": "512"}, "twinlog option batchBytes: is 512, expected 1024..8388608"),
        (
            {"compression": "brotli"},
            "twinlog option compression: is 'brotli', expected one of none, gzip, snappy, lz4, zstd",
        ),
        ({"compressionLevel": "23"}, "twinlog option compressionLevel: is 23, expected 1..22"),
    ],
)
def test_a_typed_write_option_is_refused_naming_it_as_documented(
    options: dict[str, str], message: str
) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("value", StringType(), True)])
    raw = {"servers": "h:1", "topic": "t"} | {k.lower(): v for k, v in options.items()}
    with pytest.raises(OptionError, match=re.escape(message)) as refused:
        parse_write_settings(raw, schema)
    assert refused.value.option == next(iter(options))


def test_typed_write_options_are_read_by_their_rules() -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("value", StringType(), True)])
    written = parse_write_settings(
        {
            "servers": "h:1",
            "topic": "t",
            "transactionTimeoutMs": "60000",
            "batchBytes": "8388608",
            "compression": " ZSTD ",
            "compressionLevel": "22",
        },
        schema,
    )
    assert written.transaction_timeout_ms == 60_000 and written.batch_bytes == 8 * 1024 * 1024
    assert written.compression == "zstd" and written.compression_level == 22


# --- decoding ------------------------------------------------------------------------------

records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=20_000)),
        st.lists(
            st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=40))),
            max_size=3,
        ),
        st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(list(CODEC_BY_NAME)), cut=st.data())
def test_columns_decode_what_the_engine_decodes(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: str,
    cut: st.DataObject,
) -> None:
    builder = RecordBatchBuilder(codec)
    for key, value, headers, delta_ms in records:
        builder.append(value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + delta_ms)
    batch = RecordBatch(builder.build())
    low = cut.draw(st.integers(0, len(records)))
    high = cut.draw(st.integers(low, len(records)))
    columns = ColumnBuilder("t", 2, low, high, arrow_schema(source_schema(True)), True)
    columns.add_batch(batch.header, batch.buffer)
    got = columns.flush().to_pylist()
    expected = [r for r in batch.records() if low <= r.offset < high]
    assert len(got) == len(expected)
    for row, record in zip(got, expected, strict=True):
        assert (row["key"], row["value"], row["offset"]) == (
            record.key,
            record.value,
            record.offset,
        )
        assert [(h["key"], h["value"]) for h in row["headers"]] == list(record.headers)
        assert round(row["timestamp"].timestamp() * 1000) == record.timestamp_ms
        assert (row["topic"], row["partition"], row["timestampType"]) == ("t", 2, 0)


@st.composite
def damaged_batches(draw: st.DrawFn) -> bytes:
    """A batch (valid CRC) whose records section was built right, then maybe damaged."""
    records = draw(
        st.lists(
            st.tuples(
                st.none() | st.binary(max_size=8),
                st.none() | st.binary(max_size=300),
                st.lists(
                    st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2
                ),
            ),
            min_size=1,
            max_size=6,
        )
    )
    section = bytearray(
        b"".join(
            encode_record(delta, delta, key, value, headers)
            for delta, (key, value, headers) in enumerate(records)
        )
    )
    record_count, last_offset_delta = len(records), len(records) - 1
    for _ in range(draw(st.integers(0, 2))):
        spot = draw(st.integers(0, len(section)))
        damage = draw(st.sampled_from(["byte", "cut", "insert", "count"]))
        if damage == "byte" and spot < len(section):
            section[spot] = draw(st.integers(0, 255))
        elif damage == "cut":
            del section[spot:]
        elif damage == "insert":
            section[spot:spot] = draw(st.binary(min_size=1, max_size=3))
        elif damage == "count":
            record_count = draw(st.integers(0, last_offset_delta + 1))
    codec = draw(st.sampled_from(list(CODEC_BY_NAME)))
    return batch_around(
        bytes(section),
        record_count,
        last_offset_delta=last_offset_delta,
        codec=CODEC_BY_NAME[codec],
        base_offset=10,
        timestamp_ms=1_700_000_000_000,
    )


@settings(max_examples=300, deadline=None)
@given(batch_bytes=damaged_batches(), cut=st.data())
def test_columns_refuse_exactly_what_the_engine_refuses(
    batch_bytes: bytes, cut: st.DataObject
) -> None:
    # Spark, consumers and compaction share one record decoder; a record section one of
    # them refuses, all refuse (whatever part of the batch the Spark range covers).
    batch = RecordBatch(batch_bytes)
    header = batch.header
    low = cut.draw(st.integers(10, header.next_offset - 1))
    high = cut.draw(st.integers(low + 1, header.next_offset))
    columns = ColumnBuilder("t", 2, low, high, arrow_schema(source_schema(True)), True)
    flushed: list[pyarrow.RecordBatch] = []

    def spark_decode() -> None:
        # A batch the range cuts is refused by add_batch, one taken whole by flush.
        columns.add_batch(header, batch.buffer)
        flushed.append(columns.flush())

    refused = []
    for decode in (
        lambda: list(batch.records()),
        lambda: list(iter_record_spans(records_section(batch.buffer, header), header)),
        spark_decode,
    ):
        try:
            decode()
            refused.append(False)
        except CorruptBatchError as error:
            # A compressed section that does not decompress is refused whole, before any
            # record: its message names the codec; a record's refusal names where it is.
            if not (header.codec and re.search(r"\b(gzip|snappy|lz4|zstd)\b", str(error))):
                assert re.search(r"\brecord \d+\b", str(error)), error
                assert re.search(r"\bbyte \d+\b", str(error)), error
            refused.append(True)
    assert refused in ([True] * 3, [False] * 3)
    if refused[0]:
        assert len(columns) == 0  # a refused batch adds no row
        assert columns.flush().num_rows == 0
    else:
        expected = [r.offset for r in batch.records() if low <= r.offset < high]
        assert flushed[0].column("offset").to_pylist() == expected


# --- reading a data directory ----------------------------------------------------------


def test_directory_access_bounds_timestamps_and_data_loss(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", 2)
        for step in range(3):
            builder = RecordBatchBuilder("zstd")
            for index in range(10):
                builder.append(b"v%d" % index, timestamp_ms=1000 * (step + 1) + index)
            broker.produce("orders", 0, builder.build())
    access = DirectoryLogAccess(str(tmp_path))
    assert access.topic_names() == ["orders"]
    assert access.describe("orders") == [(0, 30), (0, 0)]
    assert access.offset_for_timestamp(T0, 2005, True) == 15
    assert access.offset_for_timestamp(T0, 99_999, True) is None
    items = list(access.batches(T0, 12, 25, True))
    assert [h.base_offset for h, _ in items] == [10, 20]
    with pytest.raises(DataLossError, match="planned to read up to 40"):
        list(access.batches(T0, 0, 40, True))
    assert len(list(access.batches(T0, 0, 40, False))) == 3
    with pytest.raises(OptionError, match="not a twinlog data directory"):
        DirectoryLogAccess(str(tmp_path / "nothing"))


class RetentionRacingBroker:
    """An embedded broker whose time index answers an offset retention deleted meanwhile."""

    def __init__(self, broker: Any, log_start: int) -> None:
        self.broker = broker
        self.log_start = log_start

    def __getattr__(self, name: str) -> Any:
        return getattr(self.broker, name)

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        return 0

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> Any:
        if offset < self.log_start:
            end = self.broker.describe_topic(topic).partitions[partition].log_end_offset
            raise OffsetOutOfRangeError(f"offset {offset} < {self.log_start}", self.log_start, end)
        return self.broker.fetch(topic, partition, offset, max_bytes)


def test_a_timestamp_lookup_follows_fail_on_data_loss(tmp_path: Path) -> None:
    from twinlog.engine.broker.broker import Broker

    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", 1)
        for step in range(3):
            builder = RecordBatchBuilder("zstd")
            for index in range(10):
                builder.append(b"v", timestamp_ms=1000 * (step + 1) + index)
            broker.produce("orders", 0, builder.build())
        access = BrokerLogAccess(RetentionRacingBroker(broker, 10), 1 << 20)  # type: ignore[arg-type]
        with pytest.raises(DataLossError, match="below its log start 10"):
            access.offset_for_timestamp(T0, 1005, True)
        # failOnDataLoss=false: the lost batch is skipped, the first record found after it
        assert access.offset_for_timestamp(T0, 1005, False) == 10


class FixedBounds:
    """A LogAccess with fixed (log start, log end) per partition of one topic."""

    def __init__(self, ends: list[int]) -> None:
        self.ends = ends

    def topic_names(self) -> list[str]:
        return ["orders"]

    def describe(self, topic: str) -> list[tuple[int, int]]:
        return [(0, end) for end in self.ends]

    def close(self) -> None:
        pass


def test_report_latest_offset_is_the_logs_end_not_the_rate_limited_one() -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from twinlog.connectors.spark.stream_reader import TwinlogStreamReader

    options = {"servers": "h:1", "subscribe": "orders", "maxOffsetsPerTrigger": "100"}
    reader = TwinlogStreamReader(parse_read_settings(options, streaming=True), source_schema(False))
    reader._access = FixedBounds([900, 100])  # type: ignore[assignment]
    start = offsets_to_json({T0: 0, T1: 0})
    end = reader.latestOffset(start, ReadMaxRows(100))
    assert offsets_from_json(end) == {T0: 90, T1: 10}  # this micro-batch: limited
    latest = reader.reportLatestOffset()
    assert latest is not None and offsets_from_json(latest) == {T0: 900, T1: 100}


def test_checkpoint_spellings_of_one_location_give_one_sink_id(tmp_path: Path) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("value", StringType(), True)])

    def sink_id(location: str) -> str | None:
        options = {"servers": "h:1", "topic": "t", "checkpointLocation": location}
        return parse_write_settings(options, schema).sink_id

    place = tmp_path / "checkpoint"
    spellings = [
        str(place),
        f"{place}/",
        f"file:{place}",
        f"file://{place}/",
        f"file://localhost{place}",
        str(tmp_path) + "//checkpoint",
        f"{tmp_path}/./x/../checkpoint",
    ]
    assert {sink_id(spelling) for spelling in spellings} == {sink_id(str(place))}
    assert sink_id(str(tmp_path / "other")) != sink_id(str(place))
    assert sink_id("hdfs://nn:8020/q/c/") == sink_id("hdfs://nn:8020/q//c")
    assert sink_id("hdfs://nn:8020/q/c") != sink_id("hdfs://other:8020/q/c")
