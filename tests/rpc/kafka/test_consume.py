"""Kafka consumers (kafka-python, confluent-kafka) read what twinlog's own Producer wrote:
plain and transactional records (committed only), zstd and uncompressed batches, keys,
headers and null values, through ApiVersions, Metadata, ListOffsets and Fetch."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import kafka
import pytest

from twinlog.rpc.client import Producer

CLIENT_TIMEOUT_MS = 10_000

# (key, value, headers) of the records each test writes, in partition order
PLAIN = [
    (b"k0", b"plain-0", [("h", b"1")]),
    (None, b"plain-1", []),
    (b"k2", None, [("empty", None), ("h", b"2")]),
]


def write_mixed(broker: Any, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Plain zstd records, uncompressed ones, a committed and an aborted transaction; the
    (key, value) pairs a consumer must see, in order (partition 0 only)."""
    expected: list[tuple[bytes | None, bytes | None]] = []
    for compression in ("zstd", "none"):
        with Producer(broker, compression=compression) as producer:
            for key, value, headers in PLAIN:
                producer.send(topic, value, key=key, partition=0, headers=headers)
                expected.append((key, value))
    with Producer(broker, transactional_id=f"{topic}-writer") as producer:
        producer.init_transactions()
        with producer.transaction():
            producer.send(topic, b"committed", key=b"t", partition=0)
        expected.append((b"t", b"committed"))
        producer.begin_transaction()
        producer.send(topic, b"aborted", key=b"t", partition=0)
        producer.flush()
        producer.abort_transaction()
        with producer.transaction():
            producer.send(topic, b"after-abort", partition=0)
        expected.append((None, b"after-abort"))
    return expected


def wait_for_log_end(broker: Any, topic: str, offset: int) -> None:
    """Transactions are copied into the data log after their commit answers."""
    deadline = time.monotonic() + 10
    while broker.list_offset(topic, 0, "latest") < offset:
        assert time.monotonic() < deadline, "the committed transactions were never applied"
        time.sleep(0.02)


def test_kafka_python_consumer_reads_committed_records(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    expected = write_mixed(kafka_server.broker, topic)
    wait_for_log_end(kafka_server.broker, topic, len(expected))
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.bootstrap,
        consumer_timeout_ms=1_500,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        isolation_level="read_committed",
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = list(consumer)
    finally:
        consumer.close()
    assert [(r.key, r.value) for r in records] == expected
    assert [r.offset for r in records] == list(range(len(expected)))
    assert records[0].headers == [("h", b"1")]
    assert records[2].headers == [("empty", None), ("h", b"2")]


def test_confluent_consumer_reads_committed_records(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    expected = write_mixed(kafka_server.broker, topic)
    wait_for_log_end(kafka_server.broker, topic, len(expected))
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "group.id": "unused-assign-only",
            "enable.auto.commit": False,
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
            "isolation.level": "read_committed",
        }
    )
    received = []
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        deadline = time.monotonic() + 15
        while len(received) < len(expected) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            received.append(message)
    finally:
        consumer.close()
    assert [(m.key(), m.value()) for m in received] == expected
    assert [m.offset() for m in received] == list(range(len(expected)))
    assert received[2].headers() == [("empty", None), ("h", b"2")]


def test_kafka_python_consumer_waits_for_records_written_later(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.bootstrap,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        fetch_max_wait_ms=2_000,
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)])
        consumer.seek_to_end()
        assert consumer.poll(timeout_ms=300) == {}
        with Producer(kafka_server.broker) as producer:
            producer.send(topic, b"late", partition=1)
        found: list[Any] = []
        deadline = time.monotonic() + 10
        while not found and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                found.extend(batch)
    finally:
        consumer.close()
    assert [(r.partition, r.value) for r in found] == [(1, b"late")]


@pytest.mark.parametrize("position", ["earliest", "latest"])
def test_kafka_python_offsets_for_times_and_ends(kafka_server: Any, position: str) -> None:
    topic = kafka_server.topic()
    with Producer(kafka_server.broker) as producer:
        producer.send(topic, b"old", partition=0, timestamp_ms=1_000)
        producer.send(topic, b"new", partition=0, timestamp_ms=2_000)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    partition = kafka.TopicPartition(topic, 0)
    try:
        if position == "earliest":
            assert consumer.beginning_offsets([partition]) == {partition: 0}
            found = consumer.offsets_for_times({partition: 1_500})[partition]
            # the found record's offset and its own timestamp (not the one asked for, not -1)
            assert found is not None and (found.offset, found.timestamp) == (1, 2_000)
            exact = consumer.offsets_for_times({partition: 1_000})[partition]
            assert exact is not None and (exact.offset, exact.timestamp) == (0, 1_000)
            assert consumer.offsets_for_times({partition: 9_999})[partition] is None
        else:
            assert consumer.end_offsets([partition]) == {partition: 2}
    finally:
        consumer.close()


def test_confluent_admin_lists_offsets_by_timestamp_and_max_timestamp(kafka_server: Any) -> None:
    """ListOffsets v7+: a timestamp gives the first record at or after it with its own
    timestamp; MAX_TIMESTAMP (KIP-734) the first record holding the largest one."""
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = kafka_server.topic()
    with Producer(kafka_server.broker) as producer:
        for value, stamp in ((b"a", 1_000), (b"b", 3_000), (b"c", 2_000), (b"d", 3_000)):
            producer.send(topic, value, partition=0, timestamp_ms=stamp)
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    partition = confluent_kafka.TopicPartition(topic, 0)
    answers = {}
    for name, spec in (
        ("max", OffsetSpec.max_timestamp()),
        ("at 1500", OffsetSpec.for_timestamp(1_500)),
        ("latest", OffsetSpec.latest()),
    ):
        result = admin.list_offsets({partition: spec}, request_timeout=10)[partition].result(10)
        answers[name] = (result.offset, result.timestamp)
    assert answers["max"] == (1, 3_000)
    assert answers["at 1500"] == (1, 3_000)
    assert answers["latest"][0] == 4
