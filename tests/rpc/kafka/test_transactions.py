"""Kafka's transactional producers (kafka-python, confluent-kafka) through the listener:
commits and aborts, read-process-write with send_offsets_to_transaction, and consumers
that read while transactions abort (they never see an aborted record). Also the group
offsets of OffsetCommit and OffsetFetch from outside any group's membership."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
import pytest
from kafka.structs import OffsetAndMetadata

from twinlog.engine.base.errors import PendingTransactionError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.listener import KafkaListener
from twinlog.rpc.kafka.settings import KafkaListenerSettings

CLIENT_TIMEOUT_MS = 10_000


def kafka_python_consume(
    bootstrap: str, topic: str, count: int, timeout_s: float = 10
) -> list[Any]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        isolation_level="read_committed",
    )
    found: list[Any] = []
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while len(found) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                found.extend(batch)
        # and nothing more arrives
        for batch in consumer.poll(timeout_ms=300).values():
            found.extend(batch)
    finally:
        consumer.close()
    return found


def transactional_kafka_python(bootstrap: str, transactional_id: str) -> kafka.KafkaProducer:
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        max_block_ms=CLIENT_TIMEOUT_MS,
    )
    producer.init_transactions()
    return producer


def test_kafka_python_transactions_commit_and_abort(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    producer = transactional_kafka_python(kafka_server.bootstrap, f"{topic}-txn")
    try:
        producer.begin_transaction()
        for number in range(3):
            producer.send(topic, f"first-{number}".encode(), partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted-0", partition=0)
        producer.send(topic, b"aborted-1", partition=0)
        producer.flush(timeout=10)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"second", partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    found = kafka_python_consume(kafka_server.bootstrap, topic, 4)
    assert [r.value for r in found] == [b"first-0", b"first-1", b"first-2", b"second"]
    assert [r.offset for r in found] == [0, 1, 2, 3]  # aborted records take no offsets
    assert kafka_server.broker.list_transactions() == []


def test_kafka_python_read_process_write(kafka_server: Any) -> None:
    source, sink = kafka_server.topic(), kafka_server.topic()
    with Producer(kafka_server.broker) as writer:
        for number in range(10):
            writer.send(source, str(number).encode(), partition=0)
    group = f"{source}-doubler"
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
        isolation_level="read_committed",
    )
    producer = transactional_kafka_python(kafka_server.bootstrap, f"{source}-rpw")
    source_partition = kafka.TopicPartition(source, 0)
    try:
        consumer.assign([source_partition])
        consumer.seek_to_beginning()
        processed = 0
        deadline = time.monotonic() + 15
        while processed < 10 and time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=200).get(source_partition, [])
            if not records:
                continue
            producer.begin_transaction()
            for record in records:
                producer.send(sink, str(2 * int(record.value)).encode(), partition=0)
            next_offset = records[-1].offset + 1
            producer.send_offsets_to_transaction(
                {source_partition: OffsetAndMetadata(next_offset, "", -1)}, group
            )
            producer.commit_transaction()
            processed = next_offset
        assert processed == 10
        deadline = time.monotonic() + 10
        while consumer.committed(source_partition) != 10 and time.monotonic() < deadline:
            time.sleep(0.05)  # the offsets apply with the transaction, after its commit
        assert consumer.committed(source_partition) == 10  # OffsetFetch
    finally:
        producer.close(timeout=5)
        consumer.close()
    assert kafka_server.broker.fetch_offsets(group, [TopicPartition(source, 0)]) == {
        TopicPartition(source, 0): 10
    }
    doubled = kafka_python_consume(kafka_server.bootstrap, sink, 10)
    assert [r.value for r in doubled] == [str(2 * n).encode() for n in range(10)]


def test_confluent_transactions_while_a_consumer_reads(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "transactional.id": f"{topic}-confluent",
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
            "message.timeout.ms": CLIENT_TIMEOUT_MS,
            "compression.type": "zstd",
        }
    )
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        deadline = time.monotonic() + 30
        while not done.is_set() and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen.append(message.value())

    reader = threading.Thread(target=read)
    reader.start()
    committed: list[bytes] = []
    try:
        producer.init_transactions(CLIENT_TIMEOUT_MS / 1000)
        for round_number in range(6):
            producer.begin_transaction()
            values = [f"r{round_number}-{n}".encode() for n in range(5)]
            for value in values:
                producer.produce(topic, value, partition=0)
            if round_number % 2:
                producer.flush(10)
                producer.abort_transaction(CLIENT_TIMEOUT_MS / 1000)
            else:
                producer.commit_transaction(CLIENT_TIMEOUT_MS / 1000)
                committed.extend(values)
        deadline = time.monotonic() + 15
        while len(seen) < len(committed) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # anything more would show now
    finally:
        done.set()
        reader.join(10)
        consumer.close()
        producer.close()
    assert seen == committed


def test_offsets_committed_from_outside_a_group(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    group = f"{topic}-tool"
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    first, second = kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)
    try:
        consumer.assign([first, second])
        assert consumer.committed(first) is None
        consumer.commit({first: OffsetAndMetadata(5, "", -1), second: OffsetAndMetadata(7, "", -1)})
        assert (consumer.committed(first), consumer.committed(second)) == (5, 7)
    finally:
        consumer.close()
    assert kafka_server.broker.fetch_offsets(group, [TopicPartition(topic, 1)]) == {
        TopicPartition(topic, 1): 7
    }
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "group.id": group,
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    try:
        reader.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 9)], asynchronous=False)
        found = reader.committed(
            [confluent_kafka.TopicPartition(topic, 0), confluent_kafka.TopicPartition(topic, 1)],
            timeout=10,
        )
    finally:
        reader.close()
    assert [(tp.partition, tp.offset) for tp in found] == [(0, 9), (1, 7)]


def test_confluent_read_process_write_as_a_group_member(kafka_server: Any) -> None:
    """Offsets sent in the transaction carry the member's generation (KIP-447): the
    coordinator checks them against its membership before they apply."""
    source, sink = kafka_server.topic(), kafka_server.topic()
    with Producer(kafka_server.broker) as writer:
        for number in range(10):
            writer.send(source, str(number).encode(), partition=0)
    group = f"{source}-member"
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
            "session.timeout.ms": 6_000,
            "heartbeat.interval.ms": 200,
        }
    )
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka_server.bootstrap,
            "transactional.id": f"{source}-member-rpw",
            "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        }
    )
    processed = 0
    try:
        consumer.subscribe([source])
        producer.init_transactions(CLIENT_TIMEOUT_MS / 1000)
        deadline = time.monotonic() + 20
        while processed < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            producer.begin_transaction()
            producer.produce(sink, str(3 * int(message.value())).encode(), partition=0)
            producer.send_offsets_to_transaction(
                [confluent_kafka.TopicPartition(source, 0, message.offset() + 1)],
                consumer.consumer_group_metadata(),
                CLIENT_TIMEOUT_MS / 1000,
            )
            producer.commit_transaction(CLIENT_TIMEOUT_MS / 1000)
            processed = message.offset() + 1
    finally:
        consumer.close()
        producer.close()
    assert processed == 10
    deadline = time.monotonic() + 10
    offsets: dict[Any, int] = {}
    while offsets.get(TopicPartition(source, 0)) != 10 and time.monotonic() < deadline:
        try:
            offsets = kafka_server.broker.fetch_offsets(group, [TopicPartition(source, 0)])
        except PendingTransactionError:  # the last transaction is still being applied
            pass
        time.sleep(0.05)
    assert offsets == {TopicPartition(source, 0): 10}
    tripled = kafka_python_consume(kafka_server.bootstrap, sink, 10)
    assert [r.value for r in tripled] == [str(3 * n).encode() for n in range(10)]


def test_a_newer_kafka_python_producer_fences_the_older(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    older = transactional_kafka_python(kafka_server.bootstrap, f"{topic}-fenced")
    newer = None
    try:
        older.begin_transaction()
        older.send(topic, b"zombie", partition=0)
        older.flush(timeout=10)
        newer = transactional_kafka_python(kafka_server.bootstrap, f"{topic}-fenced")
        with pytest.raises(kafka.errors.KafkaError) as refused:
            older.commit_transaction()
        assert "fenced" in str(refused.value).lower() or "epoch" in str(refused.value).lower()
        newer.begin_transaction()
        newer.send(topic, b"alive", partition=0)
        newer.commit_transaction()
    finally:
        older.close(timeout=5)
        if newer is not None:
            newer.close(timeout=5)
    assert [r.value for r in kafka_python_consume(kafka_server.bootstrap, topic, 1)] == [b"alive"]


def test_a_transaction_outlives_a_restart_of_the_listener(tmp_path: Path) -> None:
    """The listener keeps no transaction state (the engine knows which transaction a Kafka
    producer has open): a producer that began and sent through one listener commits
    through the next one on the same port, and its epoch's sequences run on there."""
    settings = KafkaListenerSettings(frame_bytes_max=4 << 20, fetch_wait_slice_ms=50)
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", partitions=1)
        first = KafkaListener(broker, "127.0.0.1", 0, settings)
        first.start()
        port = first.port
        bootstrap = f"127.0.0.1:{port}"
        producer = transactional_kafka_python(bootstrap, "restarted")
        second = None
        try:
            producer.begin_transaction()
            producer.send("orders", b"before", partition=0).get(timeout=10)
            first.stop(grace_ms=2_000)
            second = KafkaListener(broker, "127.0.0.1", port, settings)
            second.start()
            producer.send("orders", b"after", partition=0).get(timeout=10)
            producer.commit_transaction()
            producer.begin_transaction()
            producer.send("orders", b"next", partition=0).get(timeout=10)
            producer.commit_transaction()
        finally:
            producer.close(timeout=5)
        try:
            found = kafka_python_consume(f"127.0.0.1:{port}", "orders", 3)
            assert [r.value for r in found] == [b"before", b"after", b"next"]
        finally:
            second.stop(grace_ms=2_000)
