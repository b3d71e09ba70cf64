"""A consumer group at its coordinator: joins, cooperative moves, expiry, static members,
and commits fenced by generation. A fake clock; the real assignor and reconciliation."""

from __future__ import annotations

import random

import pytest

from twinlog.engine.base.errors import (
    DiskFullError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    NonEmptyGroupError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import (
    LEAVE_EPOCH,
    NO_MEMBER_EPOCH,
    STATIC_LEAVE_EPOCH,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
)
from twinlog.engine.groups.group_membership import GroupMembership

TOPICS = {"orders": 6, "audit": 2, "other": 1}


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


class Harness:
    """A coordinator and the members' side of the protocol: each member owns exactly what
    its last answer assigned (it revokes at once)."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.epochs: list[tuple[str, int]] = []
        self.topics = dict(TOPICS)
        self.fail_persist = False
        self.membership = GroupMembership(
            lambda: self.topics, self._persist, lambda _group: 7, clock=self.clock
        )
        self.owned: dict[str, tuple[TopicPartition, ...]] = {}
        self.epoch: dict[str, int] = {}

    def _persist(self, group_id: str, epoch: int) -> None:
        if self.fail_persist:
            raise DiskFullError("the offsets partition is full")
        self.epochs.append((group_id, epoch))

    def beat(
        self,
        member_id: str,
        topics: tuple[str, ...] = ("orders",),
        *,
        epoch: int | None = None,
        instance_id: str | None = None,
    ) -> GroupHeartbeatAnswer:
        answer = self.membership.heartbeat(
            GroupHeartbeat(
                "g",
                member_id,
                self.epoch.get(member_id, 0) if epoch is None else epoch,
                topics,
                None,
                self.owned.get(member_id, ()),
                instance_id,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=20_000,
            )
        )
        self.owned[answer.member_id] = answer.assigned
        self.epoch[answer.member_id] = answer.member_epoch
        return answer

    def settle(self, *members: str, rounds: int = 10) -> None:
        for _ in range(rounds):
            for member in members:
                self.beat(member)
        assert self.membership.describe("g").state == "stable"  # type: ignore[union-attr]

    def all_owned(self) -> list[TopicPartition]:
        return [p for ps in self.owned.values() for p in ps]


def test_a_first_member_gets_every_partition_at_an_epoch_above_the_stored_one() -> None:
    group = Harness()
    answer = group.beat("a")
    assert answer.member_epoch == 8  # the stored epoch was 7
    assert answer.assigned == tuple(TopicPartition("orders", i) for i in range(6))
    assert group.epochs == [("g", 8)]


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    group = Harness()
    group.beat("a")
    first = group.beat("b")  # b joins: a must give up three; b gets nothing yet
    assert first.assigned == ()
    description = group.membership.describe("g")
    assert description is not None and description.state == "reconciling"
    # a's next heartbeat tells it what to keep; until it says it revoked, b waits
    kept = group.beat("a")
    assert len(kept.assigned) == 3
    assert group.beat("b").assigned == ()
    group.beat("a")  # a now reports owning only the three it kept
    assert len(group.beat("b").assigned) == 3
    assert sorted(group.all_owned()) == [TopicPartition("orders", i) for i in range(6)]


def test_no_partition_is_ever_owned_by_two_members_in_a_random_run() -> None:
    rng = random.Random(5)
    group = Harness()
    live: list[str] = []
    for step in range(400):
        action = rng.random()
        if action < 0.1 and len(live) < 6:
            live.append(f"m{step}")
            group.beat(live[-1])
        elif action < 0.15 and len(live) > 1:
            gone = live.pop(rng.randrange(len(live)))
            group.beat(gone, epoch=LEAVE_EPOCH)
            group.owned.pop(gone)
        elif action < 0.2 and live:
            group.topics["orders"] = rng.randint(2, 9)  # a topic grows or is recreated
            group.clock.now_s += 1  # the coordinator reads topics at most once a second
        elif live:
            group.beat(rng.choice(live))
        claimed = [p for m in live for p in group.owned.get(m, ())]
        assert len(claimed) == len(set(claimed)), f"step {step}: a partition owned twice"
    group.settle(*live)
    assert sorted(group.all_owned()) == [
        TopicPartition("orders", i) for i in range(group.topics["orders"])
    ]


def test_an_expired_member_s_partitions_go_to_the_others() -> None:
    group = Harness()
    group.beat("a")
    group.beat("b")
    group.settle("a", "b")
    group.clock.now_s += 6
    group.beat("a")  # a keeps its session alive; b stays silent
    group.clock.now_s += 5
    group.membership.expire()
    group.owned.pop("b")
    group.settle("a")
    assert len(group.owned["a"]) == 6
    with pytest.raises(UnknownMemberIdError, match="join again"):
        group.beat("b")


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() -> None:
    group = Harness()
    group.beat("a")
    group.beat("b")
    for _ in range(3):  # a keeps heartbeating but never gives anything up
        group.clock.now_s += 8
        group.membership.heartbeat(
            GroupHeartbeat(
                "g",
                "a",
                group.epoch["a"],
                ("orders",),
                owned=group.owned["a"],
                session_timeout_ms=10_000,
                rebalance_timeout_ms=20_000,
            )
        )
        group.beat("b")
    group.clock.now_s += 8
    group.beat("b")
    group.membership.expire()
    description = group.membership.describe("g")
    assert description is not None and [m.member_id for m in description.members] == ["b"]


def test_a_heartbeat_from_an_epoch_the_member_never_had_is_fenced() -> None:
    group = Harness()
    group.beat("a")
    with pytest.raises(FencedMemberEpochError, match="join again"):
        group.beat("a", epoch=3)
    with pytest.raises(UnknownMemberIdError):
        group.beat("a", epoch=8)  # the fenced member was removed: it joins again
    group.owned.pop("a")  # its partitions are lost, not revoked
    assert len(group.beat("a", epoch=0).assigned) == 6  # rejoined, in a new epoch


def test_a_static_member_restarts_without_a_rebalance_and_fences_its_old_self() -> None:
    group = Harness()
    group.beat("a", instance_id="host-1")
    group.beat("b", instance_id="host-2")
    group.settle("a", "b")
    epochs_before = list(group.epochs)
    a_partitions = group.owned["a"]
    group.beat("a", epoch=STATIC_LEAVE_EPOCH, instance_id="host-1")
    answer = group.beat("a2", epoch=0, instance_id="host-1")
    assert answer.assigned == a_partitions
    assert group.epochs == epochs_before  # no new epoch: nobody else moved
    with pytest.raises(FencedInstanceIdError, match="host-1"):
        group.membership.validate_commit("g", "a", group.epoch["a"], a_partitions[:1])


def test_commits_are_fenced_by_the_generation_the_partition_was_given_in() -> None:
    group = Harness()
    group.beat("a")
    group.settle("a")
    orders0 = TopicPartition("orders", 0)
    old_epoch = group.epoch["a"]
    group.membership.validate_commit("g", "a", old_epoch, [orders0])
    # b joins; a gives orders-0 up, then gets it back when b leaves
    group.beat("b")
    group.settle("a", "b")
    owner = "a" if orders0 in group.owned["a"] else "b"
    other = "b" if owner == "a" else "a"
    with pytest.raises(StaleMemberEpochError, match="does not own"):
        group.membership.validate_commit("g", other, group.epoch[other], [orders0])
    group.beat(owner, epoch=LEAVE_EPOCH)
    group.owned.pop(owner)
    group.settle(other)
    assert orders0 in group.owned[other]
    if other == "a":
        with pytest.raises(StaleMemberEpochError, match="zombie"):
            group.membership.validate_commit("g", "a", old_epoch, [orders0])
    group.membership.validate_commit("g", other, group.epoch[other], [orders0])


def test_a_commit_from_outside_the_group_is_refused_while_it_has_members() -> None:
    group = Harness()
    orders0 = TopicPartition("orders", 0)
    group.membership.validate_commit("g", "", NO_MEMBER_EPOCH, [orders0])  # no members: fine
    group.beat("a")
    with pytest.raises(NonEmptyGroupError, match="active member"):
        group.membership.validate_commit("g", "", NO_MEMBER_EPOCH, [orders0])
    with pytest.raises(UnknownMemberIdError):
        group.membership.validate_commit("other-group", "a", 8, [orders0])


def test_a_topic_created_or_grown_after_the_join_is_assigned() -> None:
    group = Harness()
    group.beat("a", ("orders", "later"))
    group.settle("a")
    group.topics["later"] = 2
    group.topics["orders"] = 7
    group.clock.now_s += 1  # the coordinator reads topics at most once a second
    for _ in range(3):
        group.beat("a", ("orders", "later"))
    assert TopicPartition("later", 1) in group.owned["a"]
    assert TopicPartition("orders", 6) in group.owned["a"]


def test_an_epoch_that_cannot_be_made_durable_changes_nothing_the_member_sees() -> None:
    group = Harness()
    group.beat("a")
    group.settle("a")
    group.fail_persist = True
    with pytest.raises(DiskFullError):
        group.beat("b")
    group.fail_persist = False
    group.beat("b")
    group.settle("a", "b")
    assert sorted(len(p) for p in group.owned.values()) == [3, 3]


def test_a_heartbeat_of_the_previous_epoch_does_not_finish_a_revocation() -> None:
    """Its answer was lost, so what it says it owns predates that answer."""
    group = Harness()
    group.beat("a")
    group.beat("c")
    group.settle("a", "c")
    previous = group.epoch["a"]
    group.beat("c", epoch=LEAVE_EPOCH)
    group.owned.pop("c")
    group.settle("a")  # a's epoch moves on; ``previous`` is the one before it
    assert group.epoch["a"] > previous
    group.beat("b")
    told = group.beat("a")  # a must give three up; its epoch stays until it has
    assert len(told.assigned) == 3
    group.membership.heartbeat(  # a late heartbeat of the epoch before: not taken
        GroupHeartbeat("g", "a", previous, ("orders",), owned=told.assigned,
                       session_timeout_ms=10_000, rebalance_timeout_ms=20_000)
    )  # fmt: skip
    description = group.membership.describe("g")
    assert description is not None
    [a] = [m for m in description.members if m.member_id == "a"]
    assert a.state == "unrevoked_partitions"


def test_a_member_that_joins_again_gets_its_partitions_in_a_new_generation() -> None:
    group = Harness()
    group.beat("a")
    group.settle("a")
    before = group.epoch["a"]
    group.owned.pop("a")
    answer = group.beat("a", epoch=0)  # it lost them (as it believes), and joins again
    assert answer.member_epoch > before
    assert len(answer.assigned) == 6


def test_a_commit_holds_its_group_still_and_no_other_group() -> None:
    import threading

    group = Harness()
    group.beat("a")
    group.settle("a")
    orders0 = TopicPartition("orders", 0)
    entered, release = threading.Event(), threading.Event()

    def commit() -> None:
        with group.membership.committing("g", "a", group.epoch["a"], [orders0]):
            entered.set()
            release.wait(5)

    committer = threading.Thread(target=commit)
    committer.start()
    assert entered.wait(5)
    beat_done = threading.Event()
    beater = threading.Thread(target=lambda: (group.beat("b"), beat_done.set()))
    beater.start()
    other = group.membership.heartbeat(  # another group is not held up
        GroupHeartbeat("other", "x", 0, ("orders",), session_timeout_ms=10_000)
    )
    assert len(other.assigned) == 6
    assert not beat_done.wait(0.3)  # g's membership waits for the commit to be written
    release.set()
    committer.join(5)
    assert beat_done.wait(5)
    beater.join(5)
