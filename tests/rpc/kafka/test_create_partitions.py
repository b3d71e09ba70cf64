"""CreatePartitions, as ``kafka-topics.sh --alter --partitions`` and admin clients send it:
the topic grows, never shrinks (INVALID_PARTITIONS), assignments are refused and
``validate_only`` changes nothing."""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewPartitions
from kafka.errors import InvalidPartitionsError
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE

Asked = CreatePartitionsRequest.CreatePartitionsTopic


def test_kafka_python_grows_a_topic_and_is_told_it_cannot_shrink(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    client = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10_000)
    try:
        client.create_partitions({topic: NewPartitions(total_count=5)})
        assert len(kafka_server.broker.describe_topic(topic).partitions) == 5
        try:
            client.create_partitions({topic: NewPartitions(total_count=3)})
        except InvalidPartitionsError as error:
            assert "it can only grow" in str(error)
        else:
            raise AssertionError("a shrink was accepted")
    finally:
        client.close()
    assert len(kafka_server.broker.describe_topic(topic).partitions) == 5


def test_validate_only_and_assignments_change_nothing(kafka_server: Any, raw: Any) -> None:
    topic = kafka_server.topic(partitions=1)
    checked = raw.call(
        CreatePartitionsRequest(
            topics=[Asked(name=topic, count=3, assignments=None)],
            timeout_ms=5_000,
            validate_only=True,
        ),
        CreatePartitionsResponse,
        3,
    )
    assert [(r.name, r.error_code) for r in checked.results] == [(topic, NONE)]
    placed = raw.call(
        CreatePartitionsRequest(
            topics=[
                Asked(
                    name=topic,
                    count=2,
                    assignments=[Asked.CreatePartitionsAssignment(broker_ids=[0])],
                )
            ],
            timeout_ms=5_000,
            validate_only=False,
        ),
        CreatePartitionsResponse,
        0,
    )
    assert [r.error_code for r in placed.results] == [INVALID_REQUEST]
    assert len(kafka_server.broker.describe_topic(topic).partitions) == 1
