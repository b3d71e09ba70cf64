"""AlterPartitionReassignments and ListPartitionReassignments on one node, where every
partition lives on broker 0: a move to [0] is taken, a move elsewhere or of an unknown
partition is refused per partition, a cancel finds nothing running, and nothing is listed.
kafka-python's admin client reads the answers; the raw codec sends what it never does.
The cluster's moves are in the system tests."""

from __future__ import annotations

import logging
from typing import Any

import kafka.errors
import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from twinlog.rpc.kafka.error_codes import NONE, TOPIC_AUTHORIZATION_FAILED
from twinlog.rpc.policy.audit import AUDIT_LOGGER

Asked = AlterPartitionReassignmentsRequest.ReassignableTopic
AskedPartition = Asked.ReassignablePartition
Listed = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
INVALID_REPLICATION_ASSIGNMENT = kafka.errors.InvalidReplicationAssignmentError.errno


def _codes(answer: Any) -> dict[tuple[str, int], int]:
    return {
        (topic.name, partition.partition_index): partition.error_code
        for topic in answer.responses
        for partition in topic.partitions
    }


def _admin(kafka_server: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10_000)


def test_kafka_python_moves_cancels_and_lists_on_one_node(
    kafka_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    topic = kafka_server.topic(partitions=2)
    admin = _admin(kafka_server)
    try:
        moved = admin.alter_partition_reassignments(
            {
                TopicPartition(topic, 0): [0],
                TopicPartition(topic, 1): [5],
                TopicPartition(topic, 9): [0],
            },
            timeout_ms=5_000,
        )
        cancelled = admin.alter_partition_reassignments(
            {TopicPartition(topic, 0): None}, timeout_ms=5_000
        )
        listed = admin.list_partition_reassignments(timeout_ms=5_000)
        listed_named = admin.list_partition_reassignments({topic: [0, 1]}, timeout_ms=5_000)
    finally:
        admin.close()
    assert moved == {
        TopicPartition(topic, 0): None,
        TopicPartition(topic, 1): kafka.errors.InvalidReplicationAssignmentError,
        TopicPartition(topic, 9): kafka.errors.UnknownTopicOrPartitionError,
    }
    assert cancelled == {TopicPartition(topic, 0): kafka.errors.NoReassignmentInProgressError}
    assert listed == {} and listed_named == {}
    # Audited as the gRPC door's, with this door named
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    mine = [line for line in audited if line.startswith("partitions.reassign") and topic in line]
    assert len(mine) == 2, audited
    assert all("door=kafka" in line and "outcome=ok" in line for line in mine), mine
    assert f"{topic}-1:5" in mine[0] and f"{topic}-0:cancel" in mine[1]


def test_an_empty_replica_list_is_refused_not_taken_as_a_cancel(
    kafka_server: Any, raw: Any
) -> None:
    topic = kafka_server.topic()
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=0,  # the request's default wait instead
        topics=[
            Asked(name=topic, partitions=[AskedPartition(partition_index=0, replicas=[])]),
            # named twice: answered once, for the last target
            Asked(
                name="no-such-topic",
                partitions=[
                    AskedPartition(partition_index=0, replicas=[0]),
                    AskedPartition(partition_index=0, replicas=None),
                ],
            ),
        ],
    )
    answer = raw.call(request, AlterPartitionReassignmentsResponse, 0)
    assert answer.error_code == NONE and answer.error_message is None
    assert _codes(answer) == {
        (topic, 0): INVALID_REPLICATION_ASSIGNMENT,
        ("no-such-topic", 0): kafka.errors.UnknownTopicOrPartitionError.errno,
    }
    (refused,) = [p for t in answer.responses if t.name == topic for p in t.partitions]
    assert "send null to cancel" in refused.error_message


def test_a_topic_not_allowed_is_refused_per_partition(
    guarded_server: Any, guarded_raw: Any
) -> None:
    topic = guarded_server.topic(partitions=2, prefix="readable")  # READ, not ALTER
    asked = [AskedPartition(partition_index=n, replicas=[0]) for n in (0, 1)]
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=5_000, topics=[Asked(name=topic, partitions=asked)]
    )
    answer = guarded_raw.call(request, AlterPartitionReassignmentsResponse, 0)
    assert answer.error_code == NONE
    assert _codes(answer) == {
        (topic, 0): TOPIC_AUTHORIZATION_FAILED,
        (topic, 1): TOPIC_AUTHORIZATION_FAILED,
    }
    listed = guarded_raw.call(
        ListPartitionReassignmentsRequest(timeout_ms=5_000, topics=None),
        ListPartitionReassignmentsResponse,
        0,
    )
    assert listed.error_code == NONE and listed.topics == []
