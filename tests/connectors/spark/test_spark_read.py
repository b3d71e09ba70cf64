"""Batch reads through real PySpark (local[2]) from a real ``twinlog serve`` process."""

from __future__ import annotations

import datetime
import json
import os
import time
from typing import Any

import pytest
from server_process import ServerProcess

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.remote import RemoteBroker

pytest.register_assert_rewrite("spark_support")  # before the import below, or pytest warns
from spark_support import (  # noqa: E402
    create_topic,
    produce_plain,
    produce_transaction,
    spark_marks,
    unique,
    values,
)

pytest_plugins = ["spark_support"]
pytestmark = spark_marks


def reader(spark: Any, server: ServerProcess, **options: str) -> Any:
    read = spark.read.format("twinlog").option("servers", server.address)
    for name, value in options.items():
        read = read.option(name, value)
    return read.load()


def rows_of(frame: Any) -> list[tuple[str, int, int, bytes]]:
    return sorted(
        (row.topic, row.partition, row.offset, bytes(row.value))
        for row in frame.select("topic", "partition", "offset", "value").collect()
    )


def test_reads_committed_data_only_while_aborted_and_open_transactions_exist(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "orders", 2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    produce_plain(remote, topic, 0, values("plain", 150), per_batch=40)
    produce_transaction(
        remote, {p0: values("committed0", 50), p1: values("committed1", 50)}, "commit"
    )
    produce_transaction(remote, {p0: values("aborted0", 30), p1: values("aborted1", 30)}, "abort")
    produce_transaction(remote, {p0: values("open0", 20), p1: values("open1", 20)}, "open")

    frame = reader(spark, server, subscribe=topic)

    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    rows = frame.collect()
    found = sorted(bytes(row.value) for row in rows)
    assert found == sorted(
        values("plain", 150) + values("committed0", 50) + values("committed1", 50)
    )
    by_partition: dict[int, list[int]] = {}
    for row in rows:
        assert row.topic == topic and row.timestampType == 0 and row.key is None
        assert isinstance(row.timestamp, datetime.datetime)
        by_partition.setdefault(row.partition, []).append(row.offset)
    assert sorted(by_partition[0]) == list(range(200))  # dense: committed data only
    assert sorted(by_partition[1]) == list(range(50))


def test_assign_and_subscribe_pattern_choose_partitions(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    prefix = unique("pattern")
    first, second = f"{prefix}-a", f"{prefix}-b"
    for name in (first, second):
        remote.create_topic(name, 2)
        for partition in range(2):
            produce_plain(remote, name, partition, values(f"{name}/{partition}", 10))

    assigned = reader(spark, server, assign=json.dumps({first: [1], second: [0]}))
    assert {(r.topic, r.partition) for r in assigned.collect()} == {(first, 1), (second, 0)}
    assert assigned.count() == 20

    matched = reader(spark, server, subscribePattern=f"{prefix}-.*")
    assert matched.count() == 40
    assert reader(spark, server, subscribePattern=f"{prefix}").count() == 0  # whole name only


def test_offset_json_and_sentinels(spark: Any, server: ServerProcess, remote: RemoteBroker) -> None:
    topic = create_topic(remote, "offsets", 2)
    produce_plain(remote, topic, 0, values("a", 100), per_batch=30)
    produce_plain(remote, topic, 1, values("b", 60), per_batch=30)

    frame = reader(
        spark,
        server,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 23, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 77, "1": -1}}),
    )
    rows = rows_of(frame)
    assert [(p, o) for _, p, o, _ in rows] == [(0, o) for o in range(23, 77)] + [
        (1, o) for o in range(60)
    ]
    assert rows[0][3] == b"a-23"  # a range starting inside a batch is cut exactly

    empty = reader(
        spark, server, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 100, "1": 60}})
    )
    assert empty.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "cannot be latest in a batch query"),
        ({"endingOffsets": "earliest"}, "cannot be earliest"),
        ({"startingOffsets": '{"TOPIC":{"0":-1}}'}, "-1 \\(latest\\) is not allowed"),
        ({"endingOffsets": '{"TOPIC":{"0":-2}}'}, "-2 \\(earliest\\) is not allowed"),
        ({"startingOffsets": '{"TOPIC":{"0":1}}', "subscribe": "TOPIC"}, "it leaves out TOPIC-1"),
        ({"startingOffsets": '{"TOPIC":{"0":1,"1":1,"7":1}}'}, "names TOPIC-7"),
        (
            {"startingOffsets": '{"TOPIC":{"0":5,"1":0}}'},
            "starts TOPIC-0 at offset 5, but its log ends at 3",
        ),
        ({"endingOffsets": '{"TOPIC":{"0":9,"1":0}}'}, "past its log end 3"),
        (
            {
                "startingOffsets": '{"TOPIC":{"0":2,"1":0}}',
                "endingOffsets": '{"TOPIC":{"0":1,"1":0}}',
            },
            "starting offset 2 is after the ending offset 1",
        ),
        ({"startingOffsets": "{nope"}, "is not JSON"),
        ({"assign": '{"TOPIC":[0]}'}, "set exactly one of subscribe"),
        ({"subscribe": None}, "none is set"),
        ({"subscribe": "no-such-topic-anywhere"}, "does not exist"),
        ({"kafka.bootstrap.servers": "x"}, "twinlog calls it servers"),
        ({"minPartitions": "0"}, "minPartitions: is 0, expected 1 or more"),
        ({"maxOffsetsPerTrigger": "10"}, "is for streaming queries"),
        ({"startingTimestamp": "9999999999999"}, "no record stamped at or after"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_offset_rules_fail_before_any_task_with_the_option_named(
    spark: Any, server: ServerProcess, remote: RemoteBroker, options: dict[str, Any], message: str
) -> None:
    topic = create_topic(remote, "rules", 2)
    produce_plain(remote, topic, 0, values("r", 3))
    read = spark.read.format("twinlog").option("servers", server.address)
    options = {"subscribe": topic, **options}
    for name, value in options.items():
        if value is not None:
            read = read.option(name, value.replace("TOPIC", topic))
    with pytest.raises(Exception, match=message.replace("TOPIC", topic)):
        read.load().collect()


def test_timestamps_pick_the_first_record_at_or_after(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "stamps", 1)
    base_ms = 1_700_000_000_000
    for step in range(4):  # records 0..9 at base, 10..19 at base+1s, ...
        produce_plain(remote, topic, 0, values(f"t{step}", 10), timestamp_ms=base_ms + step * 1000)

    frame = reader(
        spark,
        server,
        subscribe=topic,
        startingTimestamp=str(base_ms + 500),
        endingTimestamp=str(base_ms + 3000),
    )
    offsets = [r.offset for r in frame.select("offset").collect()]
    assert sorted(offsets) == list(range(10, 30))
    by_partition = json.dumps({topic: {"0": base_ms + 2000}})
    assert (
        reader(spark, server, subscribe=topic, startingOffsetsByTimestamp=by_partition).count()
        == 20
    )
    late = reader(
        spark,
        server,
        subscribe=topic,
        startingTimestamp=str(base_ms + 10_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.count() == 0


def test_min_partitions_splits_ranges_in_proportion(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "split", 2)
    produce_plain(remote, topic, 0, values("big", 900), per_batch=64)
    produce_plain(remote, topic, 1, values("small", 100), per_batch=64)

    frame = reader(spark, server, subscribe=topic, minPartitions="10")
    assert frame.rdd.getNumPartitions() == 10  # 9 parts of partition 0, 1 of partition 1
    rows = rows_of(frame)
    assert [(p, o) for _, p, o, _ in rows] == [(0, o) for o in range(900)] + [
        (1, o) for o in range(100)
    ]
    assert reader(spark, server, subscribe=topic, minPartitions="1").rdd.getNumPartitions() == 2


def test_include_headers_and_keys(spark: Any, server: ServerProcess, remote: RemoteBroker) -> None:
    topic = create_topic(remote, "headers", 1)
    produce_plain(
        remote, topic, 0, values("h", 3), key=b"k", headers=[("trace", b"42"), ("none", None)]
    )

    frame = reader(spark, server, subscribe=topic, includeHeaders="true")
    assert frame.schema.fields[-1].dataType.simpleString() == (
        "array<struct<key:string,value:binary>>"
    )
    row = frame.orderBy("offset").first()
    assert bytes(row.key) == b"k"
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers] == [
        ("trace", b"42"),
        ("none", None),
    ]


def test_reads_a_data_directory_without_the_broker(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = create_topic(remote, "on-disk", 2)
    p0 = TopicPartition(topic, 0)
    produce_plain(remote, topic, 1, values("plain", 70), per_batch=20)
    produce_transaction(remote, {p0: values("committed", 40)}, "commit")
    produce_transaction(remote, {p0: values("open", 40)}, "open")

    through_broker = rows_of(reader(spark, server, subscribe=topic))
    from_disk = rows_of(
        spark.read.format("twinlog").option("subscribe", topic).load(str(server.data_dir))
    )
    assert from_disk == through_broker
    assert len(from_disk) == 110
    ranged = (
        spark.read.format("twinlog")
        .options(
            path=str(server.data_dir),
            subscribe=topic,
            startingOffsets=json.dumps({topic: {"0": 5, "1": 10}}),
            endingOffsets=json.dumps({topic: {"0": 6, "1": 70}}),
            minPartitions="4",
        )
        .load()
    )
    assert len(rows_of(ranged)) == 61


def test_offsets_lost_to_retention_fail_or_are_skipped(
    spark: Any, server: ServerProcess, remote: RemoteBroker
) -> None:
    topic = unique("retention")
    remote.create_topic(topic, 1, {"segment.bytes": "2048", "retention.bytes": "4096"})
    produce_plain(remote, topic, 0, [os.urandom(200) for _ in range(200)], per_batch=5)
    deadline = time.monotonic() + 20
    while remote.describe_topic(topic).partitions[0].log_start_offset == 0:
        assert time.monotonic() < deadline, "retention did not run"
        time.sleep(0.2)
    start = remote.describe_topic(topic).partitions[0].log_start_offset
    from_zero = json.dumps({topic: {"0": 0}})

    with pytest.raises(Exception, match="below its log start"):
        reader(spark, server, subscribe=topic, startingOffsets=from_zero).collect()
    skipped = reader(
        spark, server, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false"
    )
    offsets = sorted(r.offset for r in skipped.select("offset").collect())
    assert offsets[0] >= start and offsets[-1] == 199
