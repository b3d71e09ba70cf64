"""OffsetDelete (API key 47) through kafka-python's ``KafkaAdminClient.delete_group_offsets``:
an empty group's offsets deleted (and audited), a member's topic refused per partition,
an unknown group and a principal without DELETE on the group refused."""

from __future__ import annotations

import logging
from typing import Any

import kafka.errors
import pytest
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KafkaTopicPartition

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import GroupHeartbeat
from twinlog.rpc.policy.audit import AUDIT_LOGGER

CLIENT_TIMEOUT_MS = 10_000


def admin_of(server: Any) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=server.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )


def test_offsets_of_a_group_are_deleted_but_not_those_of_a_topic_a_member_reads(
    kafka_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    read, other = kafka_server.topic(partitions=2), kafka_server.topic()
    group = f"{read}-app"
    broker = kafka_server.broker
    broker.commit_offsets(
        group, {TopicPartition(read, 0): 5, TopicPartition(read, 1): 6, TopicPartition(other, 0): 7}
    )
    admin = admin_of(kafka_server)
    try:
        with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
            deleted = admin.delete_group_offsets(group, [KafkaTopicPartition(read, 0)])
        assert deleted == {KafkaTopicPartition(read, 0): kafka.errors.NoError}
        assert broker.fetch_offsets(group, [TopicPartition(read, 0), TopicPartition(read, 1)]) == {
            TopicPartition(read, 0): -1,
            TopicPartition(read, 1): 6,
        }
        audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
        assert any(
            "group.offsets.delete" in line and f"group={group}" in line and "outcome=ok" in line
            for line in audited
        ), audited

        # A member joins, reading the topic: its offsets stay, the other topic's go.
        broker.group_heartbeat(GroupHeartbeat(group, "member-1", 0, (read,)))
        answers = admin.delete_group_offsets(
            group, [KafkaTopicPartition(read, 1), KafkaTopicPartition(other, 0)]
        )
        assert answers == {
            KafkaTopicPartition(read, 1): kafka.errors.GroupSubscribedToTopicError,
            KafkaTopicPartition(other, 0): kafka.errors.NoError,
        }
        assert broker.describe_group(group).committed == ((TopicPartition(read, 1), 6),)

        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            admin.delete_group_offsets(f"{read}-nobody", [KafkaTopicPartition(read, 0)])
    finally:
        admin.close()


def test_deleting_offsets_needs_delete_on_the_group(guarded_server: Any) -> None:
    # The anonymous principal may read readable* topics, and has no grant on any group.
    topic = guarded_server.topic(prefix="readable")
    group = f"{topic}-app"
    guarded_server.broker.commit_offsets(group, {TopicPartition(topic, 0): 3})
    admin = admin_of(guarded_server)
    try:
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            admin.delete_group_offsets(group, [KafkaTopicPartition(topic, 0)])
    finally:
        admin.close()
    assert guarded_server.broker.fetch_offsets(group, [TopicPartition(topic, 0)]) == {
        TopicPartition(topic, 0): 3
    }
