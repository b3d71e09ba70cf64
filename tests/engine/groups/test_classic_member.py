"""A classic member's state (Kafka's JoinGroup ... LeaveGroup) lives on the coordinator's
member: kept while the member is, gone when it times out, leaves or its group moves."""

from __future__ import annotations

import dataclasses

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.classic_member import ClassicMember
from twinlog.engine.groups.group_calls import JOIN_EPOCH, LEAVE_EPOCH
from twinlog.engine.groups.group_membership import GroupMembership

GROUP = "billing"


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def membership(clock: Clock) -> GroupMembership:
    return GroupMembership(
        topics=lambda: {"orders": 2},
        persist_epoch=lambda group_id, epoch: None,
        stored_epoch=lambda group_id: 0,
        clock=clock,
    )


def joined(groups: GroupMembership) -> ClassicMember:
    member = ClassicMember(
        group_id=GROUP,
        member_id="",
        instance_id=None,
        client_id="kafka-python",
        protocol_name="range",
        subscribed_topics=("orders",),
        session_timeout_ms=6_000,
        rebalance_timeout_ms=60_000,
        generation=JOIN_EPOCH,
        member_epoch=JOIN_EPOCH,
        given=(),
    )
    answer = groups.heartbeat(member.heartbeat((), JOIN_EPOCH))
    member.member_id = answer.member_id
    member.member_epoch = member.generation = answer.member_epoch
    member.given = answer.assigned
    assert groups.keep_classic_member(member)
    return member


def test_kept_while_the_member_is_and_gone_when_it_times_out() -> None:
    clock = Clock()
    groups = membership(clock)
    member = joined(groups)
    assert groups.classic_member(GROUP, member.member_id) is member
    assert set(member.given) == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    clock.now_s += 7.0  # past its 6 s session
    groups.expire()
    assert groups.classic_member(GROUP, member.member_id) is None
    assert not groups.keep_classic_member(member)  # nothing to hang it on any more


def test_gone_when_the_member_leaves_or_its_group_moves() -> None:
    groups = membership(Clock())
    leaving = joined(groups)
    groups.heartbeat(leaving.heartbeat((), LEAVE_EPOCH))
    assert groups.classic_member(GROUP, leaving.member_id) is None
    staying = joined(groups)
    groups.drop_groups(lambda group_id: group_id == GROUP)  # the coordinator moved
    assert groups.classic_member(GROUP, staying.member_id) is None


def test_a_member_that_never_joined_classically_has_none() -> None:
    groups = membership(Clock())
    classic = joined(groups)
    plain = groups.heartbeat(dataclasses.replace(classic.heartbeat((), JOIN_EPOCH), member_id=""))
    assert plain.member_id != classic.member_id
    assert groups.classic_member(GROUP, plain.member_id) is None
    assert groups.classic_member("other", classic.member_id) is None
