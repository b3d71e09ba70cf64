"""Kafka producers (kafka-python, confluent-kafka) write through the listener; twinlog's own
Consumer reads the records back: acks 0, 1 and all, idempotent producers (InitProducerId,
sequences), headers and null values, and errors a client is told."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from twinlog.engine.records.batch_builder import build_batch
from twinlog.engine.records.batch_format import pack_header, validate_batch
from twinlog.rpc.client import Consumer

CLIENT_TIMEOUT_MS = 10_000


def read_back(broker: Any, topic: str, count: int, partitions: int = 1) -> list[Any]:
    consumer = Consumer(broker)
    try:
        consumer.assign([(topic, index) for index in range(partitions)])
        consumer.seek_to_beginning()
        found: list[Any] = []
        deadline = time.monotonic() + 10
        while len(found) < count and time.monotonic() < deadline:
            found += consumer.poll(timeout_ms=200)
        return sorted(found, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_producer_writes_with_each_acks(kafka_server: Any, acks: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_server.bootstrap,
        acks=acks,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        max_block_ms=CLIENT_TIMEOUT_MS,
        compression_type="zstd",
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(
                topic,
                value=None if number == 3 else f"v{number}".encode(),
                key=f"k{number}".encode(),
                partition=number % 2,
                headers=[("n", str(number).encode())],
            )
            for number in range(20)
        ]
        producer.flush(timeout=10)
        metadata = [future.get(timeout=10) for future in futures]
    finally:
        producer.close(timeout=5)
    records = read_back(kafka_server.broker, topic, 20, partitions=2)
    assert sorted((r.key, r.value) for r in records) == sorted(
        (f"k{n}".encode(), None if n == 3 else f"v{n}".encode()) for n in range(20)
    )
    assert all(list(r.headers) == [("n", r.key[1:])] for r in records), records[0].headers
    if acks != 0:  # acks=0 answers nothing, so the client knows no offsets
        assert sorted((m.partition, m.offset) for m in metadata) == sorted(
            (r.partition, r.offset) for r in records
        )


def test_kafka_python_idempotent_producer(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_server.bootstrap,
        enable_idempotence=True,
        acks="all",
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        max_block_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        for number in range(50):
            producer.send(topic, f"i{number}".encode(), partition=0)
            if number % 10 == 9:
                producer.flush(timeout=10)  # five batches: sequences 0, 10, 20, ...
    finally:
        producer.close(timeout=5)
    records = read_back(kafka_server.broker, topic, 50)
    assert [r.value for r in records] == [f"i{n}".encode() for n in range(50)]
    producers = kafka_server.broker.describe_producers(topic, 0)
    assert len(producers) == 1 and producers[0].last_sequence == 49


def test_confluent_idempotent_producer(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "enable.idempotence": True,
            "compression.type": "zstd",
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
            "message.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    errors: list[Any] = []
    for number in range(100):
        producer.produce(
            topic,
            value=f"c{number}".encode(),
            key=f"k{number % 7}".encode(),
            partition=number % 2,
            headers=[("h", b"x")],
            on_delivery=lambda error, message: errors.append(error) if error else None,
        )
    assert producer.flush(15) == 0
    producer.close()
    assert errors == []
    records = read_back(kafka_server.broker, topic, 100, partitions=2)
    assert sorted(r.value for r in records) == sorted(f"c{n}".encode() for n in range(100))
    assert [r.value for r in records if r.partition == 0] == [
        f"c{n}".encode() for n in range(0, 100, 2)
    ]
    assert all(list(r.headers) == [("h", b"x")] for r in records)
    assert len(kafka_server.broker.describe_producers(topic, 0)) == 1


def _produce(raw: Any, topic: str, partition: int, batch: bytes, acks: int = -1) -> Any:
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5_000,
        topic_data=[
            Topic(
                name=topic,
                partition_data=[Topic.PartitionProduceData(index=partition, records=batch)],
            )
        ],
    )
    answer = raw.call(request, ProduceResponse, 9)
    return answer.responses[0].partition_responses[0]


def _with_codec(batch: bytes, codec: int) -> bytes:
    """The batch claiming another codec in its attributes, with a CRC that matches."""
    header = validate_batch(batch)
    buffer = bytearray(batch)
    pack_header(
        buffer,
        base_offset=header.base_offset,
        attributes=(header.attributes & ~7) | codec,
        last_offset_delta=header.last_offset_delta,
        first_timestamp_ms=header.first_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=header.producer_id,
        producer_generation=header.producer_generation,
        base_sequence=header.base_sequence,
        record_count=header.record_count,
    )
    return bytes(buffer)


def test_refused_produce_requests_get_kafka_error_codes(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic(partitions=1)
    batch = build_batch([b"a", b"b"], "none")
    missing = _produce(raw, topic, 5, batch)
    assert missing.error_code == kafka.errors.UnknownTopicOrPartitionError.errno
    assert "partitions 0..0" in missing.error_message
    unknown_codec = _produce(raw, topic, 0, _with_codec(batch, 5))  # no Kafka codec is 5
    assert unknown_codec.error_code == kafka.errors.CorruptRecordError.errno
    assert "codec 5" in unknown_codec.error_message
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF
    assert (
        _produce(raw, topic, 0, bytes(damaged)).error_code == kafka.errors.CorruptRecordError.errno
    )
    assert (
        _produce(raw, topic, 0, batch, acks=2).error_code
        == kafka.errors.InvalidRequiredAcksError.errno
    )
    assert kafka_server.broker.list_offset(topic, 0, "latest") == 0  # nothing was written
    written = _produce(raw, topic, 0, batch, acks=1)
    assert (written.error_code, written.base_offset) == (0, 0)


def test_a_retried_idempotent_batch_is_written_once(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic()
    identity = raw.call(
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000),
        InitProducerIdResponse,
        4,
    )
    assert identity.error_code == 0

    def batch(base_sequence: int) -> bytes:
        return build_batch(
            [b"once", b"only"],
            "none",
            producer_id=identity.producer_id,
            producer_generation=identity.producer_epoch,
            base_sequence=base_sequence,
        )

    first = _produce(raw, topic, 0, batch(0))
    retry = _produce(raw, topic, 0, batch(0))
    assert (first.error_code, retry.error_code) == (0, 0)
    assert retry.base_offset == first.base_offset == 0
    assert kafka_server.broker.list_offset(topic, 0, "latest") == 2
    gap = _produce(raw, topic, 0, batch(5))
    assert gap.error_code == kafka.errors.OutOfOrderSequenceNumberError.errno


def test_acks_0_is_never_answered_and_a_refusal_closes_the_connection(
    kafka_server: Any, connect: Any
) -> None:
    topic = kafka_server.topic()
    batch = build_batch([b"fire", b"forget"], "none")
    Topic = ProduceRequest.TopicProduceData

    def send(raw: Any, partition: int) -> None:
        request = ProduceRequest(
            transactional_id=None,
            acks=0,
            timeout_ms=5_000,
            topic_data=[
                Topic(
                    name=topic,
                    partition_data=[Topic.PartitionProduceData(index=partition, records=batch)],
                )
            ],
        )
        request.with_header(correlation_id=7, client_id="acks-0")
        raw.send_bytes(bytes(request.encode(version=9, header=True, framed=True)))

    kept = connect()
    send(kept, 0)
    # the next answer on the connection is the next request's: the produce got none
    assert kept.call(ApiVersionsRequest(), ApiVersionsResponse, 3).error_code == 0
    assert kafka_server.broker.list_offset(topic, 0, "latest") == 2
    dropped = connect()
    send(dropped, 9)  # no such partition
    assert dropped.read_frame() == b""
