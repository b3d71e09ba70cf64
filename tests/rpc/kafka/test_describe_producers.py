"""DescribeProducers (KIP-664), as ``kafka-transactions.sh describe-producers`` asks a
partition's leader: the producers that wrote to it, an open transaction's start offset,
and the per-partition refusals (an unknown topic or partition, a topic the caller may not
read); kafka-python's ``describe_producers`` reads the answer."""

from __future__ import annotations

import time
from typing import Any

import kafka
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse
from kafka.structs import TopicPartition

from twinlog.rpc.client import Producer
from twinlog.rpc.kafka.error_codes import (
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
)

Asked = DescribeProducersRequest.TopicRequest
IDEMPOTENT_RECORDS = 3


def _described(raw: Any, asked: dict[str, list[int]]) -> dict[tuple[str, int], Any]:
    request = DescribeProducersRequest(
        topics=[Asked(name=name, partition_indexes=parts) for name, parts in asked.items()]
    )
    answer = raw.call(request, DescribeProducersResponse, 0)
    return {
        (topic.name, partition.partition_index): partition
        for topic in answer.topics
        for partition in topic.partitions
    }


def _producer_id(broker: Any, transactional_id: str) -> int:
    (found,) = [
        t.producer_id for t in broker.list_transactions() if t.transactional_id == transactional_id
    ]
    return int(found)


def _describe_with_kafka_python(bootstrap: str, topic: str) -> dict[int, Any]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        states = client.describe_producers([TopicPartition(topic, 0)])
    finally:
        client.close()
    return {p.producer_id: p for p in states[TopicPartition(topic, 0)].active_producers}


def test_idempotent_and_transactional_producers_are_described(kafka_server: Any) -> None:
    topic = kafka_server.topic()
    idempotent = kafka.KafkaProducer(
        bootstrap_servers=kafka_server.bootstrap, enable_idempotence=True, max_block_ms=10_000
    )
    try:
        for number in range(IDEMPOTENT_RECORDS):
            idempotent.send(topic, b"%d" % number, partition=0).get(timeout=10)
    finally:
        idempotent.close(timeout=5)
    with Producer(kafka_server.broker, transactional_id="dp-open") as transactional:
        transactional.init_transactions()
        transactional.begin_transaction()
        transactional.send(topic, b"open", partition=0)
        transactional.flush()
        open_id = _producer_id(kafka_server.broker, "dp-open")

        described = _describe_with_kafka_python(kafka_server.bootstrap, topic)
        assert set(described) >= {open_id} and len(described) == 2
        (plain,) = [p for producer_id, p in described.items() if producer_id != open_id]
        assert plain.last_sequence == IDEMPOTENT_RECORDS - 1
        assert plain.current_transaction_start_offset == -1  # no transaction
        assert plain.last_timestamp > 0 and plain.coordinator_epoch == -1
        in_transaction = described[open_id]
        # Its records wait in the journal: none below the high watermark.
        assert in_transaction.current_transaction_start_offset == IDEMPOTENT_RECORDS
        assert in_transaction.producer_epoch == plain.producer_epoch == 0
        transactional.commit_transaction()
    # Once its commit is applied, no transaction of it is open here any more.
    deadline = time.monotonic() + 10
    while True:
        after = _describe_with_kafka_python(kafka_server.bootstrap, topic).get(open_id)
        if after is None or after.current_transaction_start_offset == -1:
            break
        assert time.monotonic() < deadline, after
        time.sleep(0.05)


def test_unknown_topics_and_partitions_are_answered_per_partition(
    kafka_server: Any, raw: Any
) -> None:
    topic = kafka_server.topic(partitions=2)
    described = _described(raw, {topic: [0, 1, 7], "dp-no-such-topic": [0]})
    codes = {key: partition.error_code for key, partition in described.items()}
    assert codes == {
        (topic, 0): NONE,
        (topic, 1): NONE,
        (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("dp-no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert described[(topic, 0)].active_producers == []  # nothing written yet
    assert described[(topic, 0)].error_message is None
    assert "dp-no-such-topic" in described[("dp-no-such-topic", 0)].error_message


def test_acls_refuse_unreadable_topics_and_hide_unseen_producers(
    guarded_server: Any, guarded_raw: Any
) -> None:
    readable = guarded_server.topic(prefix="readable")
    secret = guarded_server.topic(prefix="secret")
    broker = guarded_server.broker
    with (
        Producer(broker, transactional_id="seen-dp") as seen,
        Producer(broker, transactional_id="hidden-dp") as hidden,
    ):
        for producer in (seen, hidden):
            producer.init_transactions()
            producer.begin_transaction()
            for name in (readable, secret):
                producer.send(name, b"open", partition=0)
            producer.flush()
        seen_id = _producer_id(broker, "seen-dp")

        described = _described(
            guarded_raw,
            {readable: [0], secret: [0], "secret-never-made": [0], "readable-never-made": [0]},
        )
        codes = {key: partition.error_code for key, partition in described.items()}
        assert codes == {
            (readable, 0): NONE,
            (secret, 0): TOPIC_AUTHORIZATION_FAILED,
            # not told whether an unreadable topic exists
            ("secret-never-made", 0): TOPIC_AUTHORIZATION_FAILED,
            ("readable-never-made", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        # Only the producer whose transactional id the caller may describe is shown.
        shown = [p.producer_id for p in described[(readable, 0)].active_producers]
        assert shown == [seen_id]
        assert described[(secret, 0)].active_producers == []
        seen.abort_transaction()
        hidden.abort_transaction()
