"""A consumer group's members outlive their coordinator: on a cluster whose group
coordinator moves to another broker, and on one node across a restart, a member that
heartbeats with its member id and epoch goes on with the same partitions (no rejoin, no
rebalance), its commits are accepted, and one that never comes back expires."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import wait_for
from replication_support import Cluster

from twinlog.engine.base.errors import GroupIdNotFoundError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.groups.group_calls import (
    PROTOCOL_CLASSIC,
    PROTOCOL_CONSUMER,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupMemberRef,
)

GROUP = "billing"
TOPIC = "payments"
PARTITIONS = 4
SESSION_MS = {"a": 6_000, "b": 1_500}  # b is the one that does not come back


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    for broker in opened.brokers.values():
        broker.create_topic(TOPIC, PARTITIONS)
    opened.start_pumping()
    yield opened
    opened.close()


class Members:
    """Members "a" and "b" of the group; each owns what its last answer gave it."""

    def __init__(self) -> None:
        self.last: dict[str, GroupHeartbeatAnswer] = {}

    def beat(self, at: Broker, member_id: str) -> GroupHeartbeatAnswer:
        last = self.last.get(member_id)
        answer = at.group_heartbeat(
            GroupHeartbeat(
                GROUP,
                member_id,
                last.member_epoch if last else 0,
                (TOPIC,),
                owned=last.assigned if last else (),
                session_timeout_ms=SESSION_MS[member_id],
                rebalance_timeout_ms=10_000,
            )
        )
        self.last[member_id] = answer
        return answer

    def settle(self, at: Broker) -> None:
        for _ in range(8):
            for member_id in ("a", "b"):
                self.beat(at, member_id)
        assert at.describe_group(GROUP).state == "stable"
        assert sorted(len(self.last[m].assigned) for m in ("a", "b")) == [2, 2]


def test_members_keep_their_partitions_when_the_group_coordinator_moves(
    cluster: Cluster,
) -> None:
    first = cluster.use_group_coordinator(GROUP, 2)
    members = Members()
    members.settle(first)
    before = dict(members.last)
    epoch = first.describe_group(GROUP).group_epoch

    second = cluster.use_group_coordinator(GROUP, 3, epoch=2)
    restored = second.describe_group(GROUP)
    assert restored.group_epoch == epoch
    assert [(m.member_id, m.member_epoch, m.assigned) for m in restored.members] == [
        (m, before[m].member_epoch, before[m].assigned) for m in ("a", "b")
    ]
    for member_id in ("a", "b"):  # same member id and epoch: goes on where it was
        assert members.beat(second, member_id) == before[member_id]
    assert second.describe_group(GROUP).group_epoch == epoch  # no rebalance
    for member_id in ("a", "b"):
        answer = members.last[member_id]
        owned = answer.assigned[0]
        second.commit_offsets(GROUP, {owned: 7}, GroupMemberRef(member_id, answer.member_epoch))
        assert second.fetch_offsets(GROUP, [owned]) == {owned: 7}

    # b never heartbeats again: it expires (a session after its last heartbeat), and a,
    # heartbeating on, ends up with every partition
    def a_owns_everything() -> bool:
        return len(members.beat(second, "a").assigned) == PARTITIONS

    wait_for("b expired, its partitions a's", a_owns_everything, timeout_s=15.0, poll_s=0.2)
    assert [m.member_id for m in second.describe_group(GROUP).members] == ["a"]
    assert second.describe_group(GROUP).group_epoch > epoch


def test_members_survive_a_restart_of_a_single_node(tmp_path: Path) -> None:
    members = Members()
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
        members.settle(broker)
        epoch = broker.describe_group(GROUP).group_epoch
    before = dict(members.last)

    with Broker.open(tmp_path / "data") as broker:
        assert broker.describe_group(GROUP).group_epoch == epoch
        for member_id in ("a", "b"):
            assert members.beat(broker, member_id) == before[member_id]
        answer = members.last["a"]
        owned = answer.assigned[0]
        broker.commit_offsets(GROUP, {owned: 3}, GroupMemberRef("a", answer.member_epoch))
        time.sleep(SESSION_MS["b"] / 1000 + 0.5)
        broker.consumer_groups.membership.expire()  # as the scheduler does, now
        assert [m.member_id for m in broker.describe_group(GROUP).members] == ["a"]

    with Broker.open(tmp_path / "data") as broker:  # b's removal was durable too
        assert [m.member_id for m in broker.describe_group(GROUP).members] == ["a"]
        assert broker.fetch_offsets(GROUP, [owned]) == {owned: 3}


def test_a_kip848_group_is_of_the_consumer_kind_after_a_restart_before_any_heartbeat(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
        broker.group_heartbeat(
            GroupHeartbeat(
                GROUP, "kafka", 0, (TOPIC,), session_timeout_ms=30_000, protocol=PROTOCOL_CONSUMER
            )
        )
        assert broker.describe_group(GROUP).group_type == PROTOCOL_CONSUMER
    with Broker.open(tmp_path / "data") as broker:
        assert broker.describe_group(GROUP).group_type == PROTOCOL_CONSUMER
        with pytest.raises(GroupIdNotFoundError, match="consumer group"):
            broker.group_heartbeat(
                GroupHeartbeat(GROUP, "old", 0, (TOPIC,), protocol=PROTOCOL_CLASSIC)
            )
