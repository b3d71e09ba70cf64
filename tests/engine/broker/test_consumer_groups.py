"""Consumer groups on the embedded broker: heartbeats, commits and a transaction's offsets
fenced by generation, the group tools' calls, and the group epoch kept across a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    PendingTransactionError,
    ProducerFencedError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.groups.group_calls import (
    LEAVE_EPOCH,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupMemberRef,
)

ORDERS0 = TopicPartition("orders", 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data", transaction_check_interval_ms=60_000) as opened:
        opened.create_topic("orders", partitions=2)
        yield opened


def beat(
    broker: Broker, member_id: str, epoch: int, owned: tuple[TopicPartition, ...] = ()
) -> GroupHeartbeatAnswer:
    return broker.group_heartbeat(GroupHeartbeat("g", member_id, epoch, ("orders",), owned=owned))


def settle(broker: Broker, *members: str) -> dict[str, GroupHeartbeatAnswer]:
    """Heartbeat each member until the group is stable; each owns what it was told."""
    answers: dict[str, GroupHeartbeatAnswer] = {}
    for _ in range(10):
        for member in members:
            last = answers.get(member)
            answers[member] = beat(
                broker, member, last.member_epoch if last else 0, last.assigned if last else ()
            )
    assert broker.describe_group("g").state == "stable"
    return answers


class Transaction:
    def __init__(self, broker: Broker, transactional_id: str) -> None:
        self.broker = broker
        self.identity: ProducerIdentity = broker.init_producer(transactional_id)
        self.transaction_id = broker.begin_transaction(
            self.identity.producer_id, self.identity.producer_generation
        )

    def send(self, partition: int, value: bytes) -> None:
        self.broker.produce(
            "out",
            partition,
            batch([value], self.identity, 0, self.transaction_id),
            transaction_id=self.transaction_id,
        )

    def send_offsets(self, offset: int, member: GroupMemberRef) -> None:
        self.broker.send_offsets_to_transaction(
            self.transaction_id,
            self.identity.producer_id,
            self.identity.producer_generation,
            "g",
            {ORDERS0: offset},
            member,
        )

    def state(self) -> TransactionState | None:
        found = [
            t for t in self.broker.list_transactions() if t.transaction_id == self.transaction_id
        ]
        return found[0].state if found else None

    def commit(self) -> None:
        self.broker.commit_transaction(
            self.transaction_id,
            self.identity.producer_id,
            self.identity.producer_generation,
            wait_for_applied=True,
        )


def test_a_member_joins_commits_and_the_group_is_described_with_its_offsets(
    broker: Broker,
) -> None:
    answers = settle(broker, "a")
    member = GroupMemberRef("a", answers["a"].member_epoch)
    broker.commit_offsets("g", {ORDERS0: 5}, member)
    description = broker.describe_group("g")
    assert [m.member_id for m in description.members] == ["a"]
    assert description.members[0].assigned == (ORDERS0, TopicPartition("orders", 1))
    assert description.committed == ((ORDERS0, 5),)
    assert [(g.group_id, g.state, g.member_count) for g in broker.list_groups()] == [
        ("g", "stable", 1)
    ]


def test_a_commit_from_outside_the_group_or_from_a_stranger_is_refused(broker: Broker) -> None:
    broker.commit_offsets("g", {ORDERS0: 1})  # no members yet: a "simple" commit
    settle(broker, "a")
    with pytest.raises(NonEmptyGroupError, match="active member"):
        broker.commit_offsets("g", {ORDERS0: 2})
    with pytest.raises(UnknownMemberIdError):
        broker.commit_offsets("g", {ORDERS0: 2}, GroupMemberRef("stranger", 1))
    assert broker.fetch_offsets("g", [ORDERS0]) == {ORDERS0: 1}


def test_a_zombie_s_transactional_offsets_are_fenced_by_generation_whatever_its_age(
    broker: Broker,
) -> None:
    """The zombie begins its transaction *after* the new owner's: ordering by age would
    fence the new owner; ordering by generation fences the zombie."""
    broker.create_topic("out", partitions=1)
    first = settle(broker, "zombie")
    zombie_member = GroupMemberRef("zombie", first["zombie"].member_epoch)
    # the zombie stops heartbeating; its session would expire; here it leaves for good
    beat(broker, "zombie", LEAVE_EPOCH)
    second = settle(broker, "owner")
    owner_member = GroupMemberRef("owner", second["owner"].member_epoch)
    owner = Transaction(broker, "owner-producer")
    zombie = Transaction(broker, "zombie-producer")  # begun later
    zombie.send(0, b"late")
    with pytest.raises(UnknownMemberIdError):
        zombie.send_offsets(7, zombie_member)
    owner.send(0, b"fresh")
    owner.send_offsets(9, owner_member)
    owner.commit()
    assert broker.fetch_offsets("g", [ORDERS0]) == {ORDERS0: 9}


def test_the_new_owner_aborts_an_open_holder_from_the_previous_generation(
    broker: Broker,
) -> None:
    broker.create_topic("out", partitions=1)
    new = Transaction(broker, "new-producer")  # begun first: age would fence it
    first = settle(broker, "old")
    old = Transaction(broker, "old-producer")
    old.send_offsets(3, GroupMemberRef("old", first["old"].member_epoch))  # takes the offsets
    beat(broker, "old", LEAVE_EPOCH)
    second = settle(broker, "new")
    with pytest.raises(PendingTransactionError):
        broker.fetch_offsets("g", [ORDERS0])  # the old owner's offsets are pending
    new.send_offsets(4, GroupMemberRef("new", second["new"].member_epoch))
    assert old.state() in (TransactionState.ABORTED, None)
    new.commit()
    assert broker.fetch_offsets("g", [ORDERS0]) == {ORDERS0: 4}


def test_without_membership_transaction_age_still_decides(broker: Broker) -> None:
    older = Transaction(broker, "p1")
    younger = Transaction(broker, "p2")
    younger.send_offsets(1, GroupMemberRef())
    with pytest.raises(ProducerFencedError, match="zombie"):
        older.send_offsets(2, GroupMemberRef())


def test_a_commit_from_an_older_generation_of_the_partition_is_stale(broker: Broker) -> None:
    answers = settle(broker, "a")
    old_epoch = answers["a"].member_epoch
    answers = settle(broker, "a", "b")
    owner = "a" if ORDERS0 in answers["a"].assigned else "b"
    if owner == "a":  # a kept orders-0: b leaves and a is given orders-1 again, not 0
        beat(broker, "a", LEAVE_EPOCH)
        answers = settle(broker, "b")
        beat(broker, "b", LEAVE_EPOCH)
        answers = settle(broker, "a")
    else:
        beat(broker, "b", LEAVE_EPOCH)
        answers = settle(broker, "a")
    assert ORDERS0 in answers["a"].assigned
    with pytest.raises(StaleMemberEpochError, match="zombie"):
        broker.commit_offsets("g", {ORDERS0: 3}, GroupMemberRef("a", old_epoch))
    broker.commit_offsets("g", {ORDERS0: 3}, GroupMemberRef("a", answers["a"].member_epoch))


def test_delete_refuses_a_group_with_members_then_deletes_offsets_and_epoch(
    broker: Broker,
) -> None:
    answers = settle(broker, "a")
    broker.commit_offsets("g", {ORDERS0: 5}, GroupMemberRef("a", answers["a"].member_epoch))
    with pytest.raises(NonEmptyGroupError, match="active member"):
        broker.delete_group("g")
    beat(broker, "a", LEAVE_EPOCH)
    broker.delete_group("g")
    assert broker.list_groups() == []
    with pytest.raises(GroupIdNotFoundError):
        broker.describe_group("g")
    with pytest.raises(GroupIdNotFoundError):
        broker.delete_group("g")
    assert broker.fetch_offsets("g", [ORDERS0]) == {ORDERS0: -1}


def test_the_group_epoch_only_grows_across_a_restart(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data") as broker:
        broker.create_topic("orders", partitions=2)
        epoch = settle(broker, "a")["a"].member_epoch
        assert epoch >= 1
    with Broker.open(tmp_path / "data") as broker:
        assert broker.describe_group("g").group_epoch == epoch
        goes_on = beat(broker, "a", epoch, (ORDERS0, TopicPartition("orders", 1)))
        assert goes_on.member_epoch == epoch  # restored: no new epoch for it
        assert settle(broker, "a")["a"].member_epoch > epoch  # joined again: a new one
