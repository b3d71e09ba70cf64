"""Durable membership at the coordinator: each step writes what it changed (one change,
before the answer, nothing on a keep-alive), and a coordinator that restores the written
members lets them go on where they were."""

from __future__ import annotations

import pytest

from twinlog.engine.base.errors import DiskFullError, GroupIdNotFoundError, UnknownMemberIdError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.durable_member import DurableMember, GroupChange, StoredGroup
from twinlog.engine.groups.group_calls import (
    LEAVE_EPOCH,
    PROTOCOL_CLASSIC,
    PROTOCOL_CONSUMER,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
)
from twinlog.engine.groups.group_membership import GroupMembership

TOPICS = {"orders": 4}


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


class Log:
    """What the coordinator wrote, folded as a new coordinator's load folds it."""

    def __init__(self) -> None:
        self.changes: list[GroupChange] = []
        self.fail = False

    def persist(self, change: GroupChange) -> None:
        if self.fail:
            raise DiskFullError("the offsets partition is full")
        self.changes.append(change)

    def stored(self) -> list[StoredGroup]:
        epoch = 0
        members: dict[str, DurableMember] = {}
        for change in self.changes:
            epoch = change.group_epoch if change.group_epoch is not None else epoch
            members.update((m.member_id, m) for m in change.members)
            for member_id in change.removed:
                members.pop(member_id)
        return [StoredGroup("g", epoch, tuple(members[m] for m in sorted(members)))]


def coordinator(log: Log, clock: Clock) -> GroupMembership:
    return GroupMembership(
        lambda: TOPICS, None, lambda _group: 0, clock=clock, persist_change=log.persist
    )


class Members:
    """Each member owns exactly what its last answer gave it."""

    def __init__(self, membership: GroupMembership) -> None:
        self.membership = membership
        self.last: dict[str, GroupHeartbeatAnswer] = {}

    def beat(self, member_id: str, epoch: int | None = None) -> GroupHeartbeatAnswer:
        last = self.last.get(member_id)
        answer = self.membership.heartbeat(
            GroupHeartbeat(
                "g",
                member_id,
                (last.member_epoch if last else 0) if epoch is None else epoch,
                ("orders",),
                owned=last.assigned if last else (),
                session_timeout_ms=10_000,
                rebalance_timeout_ms=20_000,
            )
        )
        self.last[member_id] = answer
        return answer

    def settle(self, *member_ids: str) -> None:
        for _ in range(6):
            for member_id in member_ids:
                self.beat(member_id)
        description = self.membership.describe("g")
        assert description is not None and description.state == "stable"


def test_each_step_writes_one_change_and_a_keep_alive_writes_nothing() -> None:
    log, clock = Log(), Clock()
    members = Members(coordinator(log, clock))
    members.beat("a")
    assert len(log.changes) == 1
    [change] = log.changes
    assert change.group_epoch == 1
    assert [m.member_id for m in change.members] == ["a"]
    assert change.members[0].target == frozenset(TopicPartition("orders", i) for i in range(4))
    members.settle("a")
    written = len(log.changes)
    for _ in range(3):
        clock.now_s += 1
        members.beat("a")
    assert len(log.changes) == written  # nothing durable changed


def test_what_a_member_is_told_was_written_first() -> None:
    log, clock = Log(), Clock()
    members = Members(coordinator(log, clock))
    members.settle("a")
    log.fail = True
    with pytest.raises(DiskFullError):
        members.beat("b")
    assert [m.member_id for c in log.changes for m in c.members] == ["a"] * len(log.changes)
    log.fail = False
    members.beat("b")  # joins again: what the failed step changed is written now
    members.settle("a", "b")
    [stored] = log.stored()
    assert [m.member_id for m in stored.members] == ["a", "b"]
    for durable in stored.members:
        answer = members.last[durable.member_id]
        assert durable.assignment.member_epoch == answer.member_epoch
        assert sorted(durable.assignment.assigned) == list(answer.assigned)


def test_restored_members_go_on_with_their_epochs_and_partitions() -> None:
    log, clock = Log(), Clock()
    before = Members(coordinator(log, clock))
    before.settle("a", "b")
    written = len(log.changes)

    after = coordinator(log, clock)  # the group's next coordinator
    after.restore(log.stored())
    moved = Members(after)
    moved.last = dict(before.last)
    for member_id in ("a", "b"):
        answer = moved.beat(member_id)
        assert answer == before.last[member_id]  # same epoch and partitions
    assert len(log.changes) == written  # no rebalance, nothing to write
    description = after.describe("g")
    assert description is not None and description.state == "stable"


def test_a_restored_member_that_never_comes_back_expires_a_session_after_the_load() -> None:
    log, clock = Log(), Clock()
    before = Members(coordinator(log, clock))
    before.settle("a", "b")

    clock.now_s += 9  # most of the members' sessions passed at the old coordinator
    after = coordinator(log, clock)
    after.restore(log.stored())
    moved = Members(after)
    moved.last = dict(before.last)
    clock.now_s += 9
    after.expire()
    moved.beat("a")
    description = after.describe("g")
    assert description is not None and len(description.members) == 2  # a full session
    clock.now_s += 2  # b's session (10 s from the load) is over; a heartbeated since
    after.expire()
    with pytest.raises(UnknownMemberIdError):
        moved.beat("b")
    assert log.changes[-1].removed == ("b",)
    for _ in range(4):
        answer = moved.beat("a")
    assert len(answer.assigned) == 4  # b's partitions went to a


def test_a_member_that_leaves_is_deleted_from_the_log() -> None:
    log, clock = Log(), Clock()
    members = Members(coordinator(log, clock))
    members.settle("a", "b")
    members.beat("b", epoch=LEAVE_EPOCH)
    assert log.changes[-1].removed == ("b",)
    assert [m.member_id for m in log.stored()[0].members] == ["a"]


def test_a_restored_kip848_group_keeps_its_kind_before_any_member_heartbeats() -> None:
    log, clock = Log(), Clock()
    before = coordinator(log, clock)
    before.heartbeat(
        GroupHeartbeat("g", "kafka", 0, subscribed_topics=("orders",), protocol=PROTOCOL_CONSUMER)
    )
    after = coordinator(log, clock)  # the group's next coordinator
    after.restore(log.stored())
    listing = {g.group_id: g for g in after.listings()}["g"]
    assert listing.group_type == PROTOCOL_CONSUMER
    description = after.describe("g")
    assert description is not None and description.group_type == PROTOCOL_CONSUMER
    with pytest.raises(GroupIdNotFoundError, match="consumer group"):
        after.heartbeat(
            GroupHeartbeat(
                "g", "classic", 0, subscribed_topics=("orders",), protocol=PROTOCOL_CLASSIC
            )
        )
