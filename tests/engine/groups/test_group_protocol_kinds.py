"""What the coordinator does for Kafka's KIP-848 door: a heartbeat that says only what
changed (None keeps the subscription and rebalance timeout, None in owned finishes no
revocation), whether the assignment changed, and the kinds of group (classic, consumer)
that refuse each other while twinlog's own members join either."""

from __future__ import annotations

import pytest

from twinlog.engine.base.errors import GroupIdNotFoundError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import (
    LEAVE_EPOCH,
    PROTOCOL_CLASSIC,
    PROTOCOL_CONSUMER,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
)
from twinlog.engine.groups.group_membership import GroupMembership

TOPICS = {"orders": 2}


def membership() -> GroupMembership:
    return GroupMembership(lambda: TOPICS, lambda _group, _epoch: None, lambda _group: 0)


def join(
    coordinator: GroupMembership, member_id: str, protocol: str = PROTOCOL_CONSUMER
) -> GroupHeartbeatAnswer:
    return coordinator.heartbeat(
        GroupHeartbeat("g", member_id, 0, subscribed_topics=("orders",), protocol=protocol)
    )


def test_an_incremental_heartbeat_keeps_what_it_does_not_say() -> None:
    coordinator = membership()
    joined = join(coordinator, "a")
    assert joined.assignment_changed and len(joined.assigned) == 2
    kept = coordinator.heartbeat(
        GroupHeartbeat(
            "g",
            "a",
            joined.member_epoch,
            subscribed_topics=None,
            owned=None,
            rebalance_timeout_ms=None,
            protocol=PROTOCOL_CONSUMER,
        )
    )
    assert kept.assigned == joined.assigned and not kept.assignment_changed
    description = coordinator.describe("g")
    assert description is not None and description.members[0].subscribed_topics == ("orders",)


def test_a_revocation_is_not_finished_by_a_heartbeat_that_says_nothing_of_it() -> None:
    coordinator = membership()
    a = join(coordinator, "a")
    b = join(coordinator, "b")
    assert b.assigned == ()
    silent = GroupHeartbeat("g", "a", a.member_epoch, subscribed_topics=None, owned=None)
    told = coordinator.heartbeat(silent)
    assert len(told.assigned) == 1 and told.assignment_changed  # revoke one
    assert coordinator.heartbeat(silent).member_epoch == a.member_epoch  # still revoking
    waiting = coordinator.heartbeat(
        GroupHeartbeat("g", "b", b.member_epoch, subscribed_topics=None, owned=None)
    )
    assert waiting.assigned == ()  # a still holds it: not given to b yet
    released = coordinator.heartbeat(
        GroupHeartbeat("g", "a", a.member_epoch, subscribed_topics=None, owned=told.assigned)
    )
    assert released.member_epoch > a.member_epoch
    given = coordinator.heartbeat(
        GroupHeartbeat("g", "b", waiting.member_epoch, subscribed_topics=None, owned=())
    )
    assert set(given.assigned) == {TopicPartition("orders", 0), TopicPartition("orders", 1)} - set(
        told.assigned
    )


def test_classic_and_consumer_members_refuse_each_other_while_the_group_has_members() -> None:
    coordinator = membership()
    join(coordinator, "new", PROTOCOL_CONSUMER)
    with pytest.raises(GroupIdNotFoundError, match="consumer group"):
        join(coordinator, "old", PROTOCOL_CLASSIC)
    join(coordinator, "own", "")  # twinlog's own consumer joins either kind
    listing = {g.group_id: g for g in coordinator.listings()}["g"]
    assert listing.group_type == PROTOCOL_CONSUMER and listing.member_count == 2
    for member_id in ("new", "own"):
        coordinator.heartbeat(GroupHeartbeat("g", member_id, LEAVE_EPOCH))
    assert join(coordinator, "old", PROTOCOL_CLASSIC).assigned  # empty: any kind may start it
    with pytest.raises(GroupIdNotFoundError, match="classic group"):
        join(coordinator, "new", PROTOCOL_CONSUMER)
    description = coordinator.describe("g")
    assert description is not None and description.group_type == PROTOCOL_CLASSIC
