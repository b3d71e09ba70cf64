"""Real consumers (kafka-python, confluent-kafka) read on across a new leader epoch of
their partition (a promotion of the single node's partition, as a leader change gives
one): each validates its position at the new epoch with OffsetForLeaderEpoch (KIP-320),
then fetches on, instead of stalling on a broker that does not answer it."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import kafka

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Producer

CLIENT_TIMEOUT_MS = 10_000


def write(broker: Any, topic: str, values: list[bytes]) -> None:
    with Producer(broker) as producer:
        for value in values:
            producer.send(topic, value, partition=0)


def promote(broker: Any, topic: str, epoch: int) -> None:
    """A new leader epoch for partition 0, as a leader change gives one."""
    broker.partition(TopicPartition(topic, 0)).epochs.become_leader(epoch)


def _read(poll: Any, wanted: int, timeout_s: float = 10) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < wanted and time.monotonic() < deadline:
        values.extend(poll())
    return values


def test_kafka_python_reads_on_across_a_new_leader_epoch(kafka_server: Any) -> None:
    broker = kafka_server.broker
    topic = kafka_server.topic()
    write(broker, topic, [b"0", b"1"])
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        metadata_max_age_ms=300,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])

        def poll() -> list[bytes]:
            batches = consumer.poll(timeout_ms=200)
            return [record.value for records in batches.values() for record in records]

        assert _read(poll, 2) == [b"0", b"1"]
        # a new leader epoch: the consumer's position (read under epoch 0) is validated at
        # the new leader with OffsetForLeaderEpoch, then it fetches on
        promote(broker, topic, 1)
        write(broker, topic, [b"2", b"3"])
        assert _read(poll, 2) == [b"2", b"3"]
    finally:
        consumer.close()


def test_confluent_kafka_reads_on_across_a_new_leader_epoch(kafka_server: Any) -> None:
    broker = kafka_server.broker
    topic = kafka_server.topic()
    write(broker, topic, [b"0", b"1"])
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "group.id": f"{topic}-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 300,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])

        def poll() -> list[bytes]:
            message = consumer.poll(0.2)
            if message is None or message.error():
                return []
            return [message.value()]

        assert _read(poll, 2) == [b"0", b"1"]
        promote(broker, topic, 1)
        write(broker, topic, [b"2", b"3"])
        assert _read(poll, 2) == [b"2", b"3"]
    finally:
        consumer.close()
