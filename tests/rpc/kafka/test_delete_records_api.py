"""DeleteRecords (API key 21), as ``kafka-delete-records.sh`` and admin clients send it: the
partition's log start moves (-1: to the high watermark) and is answered as the low
watermark; per partition OFFSET_OUT_OF_RANGE above the high watermark,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST on an internal topic, and
TOPIC_AUTHORIZATION_FAILED without DELETE on the topic."""

from __future__ import annotations

from typing import Any

import pytest
from broker_support import batch
from kafka import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError as KafkaOffsetOutOfRangeError
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
from kafka.structs import TopicPartition as KafkaTopicPartition

from twinlog.engine.base.errors import OffsetOutOfRangeError
from twinlog.rpc.kafka.error_codes import (
    INVALID_REQUEST,
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from twinlog.rpc.wire.error_table import KafkaCode

Asked = DeleteRecordsRequest.DeleteRecordsTopic
AskedPartition = Asked.DeleteRecordsPartition
OFFSET_OUT_OF_RANGE = int(KafkaCode.OFFSET_OUT_OF_RANGE)
RECORDS = 6


def _filled(server: Any, partitions: int = 1, prefix: str = "topic") -> str:
    topic = server.topic(partitions=partitions, prefix=prefix)
    for number in range(RECORDS):
        server.broker.produce(topic, 0, batch([b"r%d" % number]))
    return topic


def _ask(raw: Any, version: int, topics: dict[str, list[tuple[int, int]]]) -> Any:
    request = DeleteRecordsRequest(
        topics=[
            Asked(
                name=name,
                partitions=[AskedPartition(partition_index=p, offset=o) for p, o in asked],
            )
            for name, asked in topics.items()
        ],
        timeout_ms=5_000,
    )
    return raw.call(request, DeleteRecordsResponse, version)


def _answers(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (topic.name, p.partition_index): (p.error_code, p.low_watermark)
        for topic in response.topics
        for p in topic.partitions
    }


def test_kafka_python_deletes_records_and_is_told_past_the_high_watermark(
    kafka_server: Any,
) -> None:
    topic = _filled(kafka_server)
    client = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10_000)
    try:
        done = client.delete_records({KafkaTopicPartition(topic, 0): 4})
        assert done[KafkaTopicPartition(topic, 0)]["low_watermark"] == 4
        with pytest.raises(KafkaOffsetOutOfRangeError):
            client.delete_records({KafkaTopicPartition(topic, 0): RECORDS + 1})
    finally:
        client.close()
    broker = kafka_server.broker
    assert broker.list_offset(topic, 0, "earliest") == 4
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch(topic, 0, 3)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_each_version_answers_per_partition(kafka_server: Any, raw: Any, version: int) -> None:
    topic = _filled(kafka_server, partitions=2)
    response = _ask(
        raw,
        version,
        {
            topic: [(0, -1), (1, 0), (5, 0)],
            "__consumer_offsets": [(0, -1)],
            "no-such-topic": [(0, 0)],
        },
    )
    assert _answers(response) == {
        (topic, 0): (NONE, RECORDS),  # -1: the high watermark
        (topic, 1): (NONE, 0),  # an empty partition, at 0 already
        (topic, 5): (UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("__consumer_offsets", 0): (INVALID_REQUEST, -1),
        ("no-such-topic", 0): (UNKNOWN_TOPIC_OR_PARTITION, -1),
    }
    again = _ask(raw, version, {topic: [(0, RECORDS + 1), (0, 2)]})
    assert [p.error_code for t in again.topics for p in t.partitions] == [
        OFFSET_OUT_OF_RANGE,
        NONE,
    ]
    assert kafka_server.broker.list_offset(topic, 0, "earliest") == RECORDS


def test_without_delete_on_the_topic_nothing_is_deleted(
    guarded_server: Any, guarded_raw: Any
) -> None:
    topic = _filled(guarded_server, prefix="readable")  # READ only: no DELETE
    response = _ask(guarded_raw, 2, {topic: [(0, 3)], "readable-unknown": [(0, 0)]})
    assert _answers(response) == {
        (topic, 0): (TOPIC_AUTHORIZATION_FAILED, -1),
        ("readable-unknown", 0): (TOPIC_AUTHORIZATION_FAILED, -1),
    }
    assert guarded_server.broker.list_offset(topic, 0, "earliest") == 0
