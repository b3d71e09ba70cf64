"""gzip, snappy, lz4 and zstd batches from Kafka's clients (kafka-python, confluent-kafka)
and from twinlog's own Producer are stored in their codec, and every reader reads them:
kafka-python and twinlog's Consumer (the raw protocol's checks: test_codec_door)."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest

from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.records.compression import CODEC_BY_NAME
from twinlog.rpc.client import Consumer, Producer

CLIENT_TIMEOUT_MS = 10_000
KAFKA_CODECS = ["gzip", "snappy", "lz4", "zstd"]
COUNT = 40


def _values(codec: str) -> list[bytes]:
    return [f"{codec}-{number}-".encode() * 30 for number in range(COUNT)]


def _stored_codecs(broker: Any, topic: str) -> set[int]:
    stored = broker.fetch(topic, 0, 0).records
    return {batch.header.codec for batch in iter_batches(stored)}


def _twinlog_reads(broker: Any, topic: str, count: int) -> list[bytes | None]:
    consumer = Consumer(broker)
    try:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        found: list[Any] = []
        deadline = time.monotonic() + 10
        while len(found) < count and time.monotonic() < deadline:
            found += consumer.poll(timeout_ms=200)
        return [record.value for record in sorted(found, key=lambda r: r.offset)]
    finally:
        consumer.close()


def _kafka_python_reads(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        partition = kafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning()
        found: list[Any] = []
        deadline = time.monotonic() + 10
        while len(found) < count and time.monotonic() < deadline:
            found += consumer.poll(timeout_ms=200).get(partition, [])
        return [record.value for record in found]
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", KAFKA_CODECS)
def test_kafka_python_batches_are_stored_in_their_codec_and_read_by_every_reader(
    kafka_server: Any, codec: str
) -> None:
    topic = kafka_server.topic(prefix=f"kp-{codec}")
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_server.bootstrap,
        compression_type=codec,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        max_block_ms=CLIENT_TIMEOUT_MS,
        linger_ms=20,
    )
    try:
        for value in _values(codec):
            producer.send(topic, value, partition=0)
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=5)
    assert _stored_codecs(kafka_server.broker, topic) == {CODEC_BY_NAME[codec]}
    assert _twinlog_reads(kafka_server.broker, topic, COUNT) == _values(codec)
    assert _kafka_python_reads(kafka_server.bootstrap, topic, COUNT) == _values(codec)


@pytest.mark.parametrize("codec", ["lz4", "snappy", "gzip"])
def test_confluent_kafka_batches_are_stored_in_their_codec(kafka_server: Any, codec: str) -> None:
    topic = kafka_server.topic(prefix=f"ck-{codec}")
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
            "message.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    errors: list[Any] = []
    for value in _values(codec):
        producer.produce(
            topic,
            value=value,
            partition=0,
            on_delivery=lambda error, _: errors.append(error) if error else None,
        )
    assert producer.flush(15) == 0
    assert errors == []
    assert _stored_codecs(kafka_server.broker, topic) == {CODEC_BY_NAME[codec]}
    assert _twinlog_reads(kafka_server.broker, topic, COUNT) == _values(codec)
    assert _kafka_python_reads(kafka_server.bootstrap, topic, COUNT) == _values(codec)


@pytest.mark.parametrize("codec", ["lz4", "snappy", "gzip"])
def test_twinlogs_producer_writes_each_codec_for_kafka_readers(
    kafka_server: Any, codec: str
) -> None:
    topic = kafka_server.topic(prefix=f"own-{codec}")
    with Producer(kafka_server.broker, compression=codec) as producer:
        for value in _values(codec):
            producer.send(topic, value, partition=0)
    assert _stored_codecs(kafka_server.broker, topic) == {CODEC_BY_NAME[codec]}
    assert _kafka_python_reads(kafka_server.bootstrap, topic, COUNT) == _values(codec)
    assert _twinlog_reads(kafka_server.broker, topic, COUNT) == _values(codec)
