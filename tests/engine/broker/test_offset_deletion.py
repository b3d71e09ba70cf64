"""Deleting some of a group's committed offsets (Kafka's OffsetDelete) on the embedded
broker: the deletions kept across compaction and a restart, and what is refused (a
member's topic, a partition of no topic, an unknown group)."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.groups.group_calls import GroupHeartbeat

ORDERS0, ORDERS1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
SMALL = {"offsets_segment_bytes": 2048, "offsets_partitions": 2}


def test_offsets_deleted_stay_deleted_across_compaction_and_a_restart(tmp_path: Path) -> None:
    with Broker.open(tmp_path, **SMALL) as broker:
        broker.create_topic("orders", partitions=2)
        for number in range(30):
            broker.commit_offsets("app", {ORDERS0: number, ORDERS1: number})
        assert broker.delete_offsets("app", [ORDERS0]) == {ORDERS0: None}
        for number in range(30, 60):  # the deletion's segment is sealed, then compacted
            broker.commit_offsets("app", {ORDERS1: number})
        broker.scheduler.run_round("compaction")
        assert broker.fetch_offsets("app", [ORDERS0, ORDERS1]) == {ORDERS0: -1, ORDERS1: 59}
        # a partition without an offset is answered as deleted, as Kafka answers it
        assert broker.delete_offsets("app", [ORDERS0]) == {ORDERS0: None}
    with Broker.open(tmp_path, **SMALL) as broker:
        assert broker.fetch_offsets("app", [ORDERS0, ORDERS1]) == {ORDERS0: -1, ORDERS1: 59}
        assert broker.describe_group("app").committed == ((ORDERS1, 59),)


def test_a_member_s_topic_an_unknown_partition_and_an_unknown_group_are_refused(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", partitions=2)
        broker.create_topic("audit")
        audit0 = TopicPartition("audit", 0)
        broker.commit_offsets("app", {ORDERS0: 5, audit0: 6})
        broker.group_heartbeat(GroupHeartbeat("app", "m1", 0, ("orders",)))
        answers = broker.delete_offsets(
            "app", [ORDERS0, audit0, TopicPartition("gone", 0), TopicPartition("orders", 9)]
        )
        assert isinstance(answers[ORDERS0], GroupSubscribedToTopicError)
        assert "reads topic 'orders'" in str(answers[ORDERS0])
        assert answers[audit0] is None
        assert isinstance(answers[TopicPartition("gone", 0)], UnknownTopicOrPartitionError)
        assert isinstance(answers[TopicPartition("orders", 9)], UnknownTopicOrPartitionError)
        assert broker.fetch_offsets("app", [ORDERS0, audit0]) == {ORDERS0: 5, audit0: -1}
        with pytest.raises(GroupIdNotFoundError, match="no group 'nobody'"):
            broker.delete_offsets("nobody", [ORDERS0])
