"""The client side of group membership against the real coordinator logic, in process
(``engine/groups``): heartbeats driven one at a time, so races between the heartbeat
thread and the consumer's thread are laid out step by step."""

from __future__ import annotations

import time

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import JOIN_EPOCH
from twinlog.engine.groups.group_membership import GroupMembership
from twinlog.rpc.client.consumer_membership import ConsumerMembership, Subscription
from twinlog.rpc.client.retry import RetryPolicy

TOPICS = {"t": 4}


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def coordinator(clock: Clock | None = None) -> GroupMembership:
    return GroupMembership(
        lambda: TOPICS, lambda _group, _epoch: None, lambda _group: 0, clock=clock or Clock()
    )


def member(group: GroupMembership, name: str) -> ConsumerMembership:
    joined = ConsumerMembership(
        group.heartbeat,
        lambda: list(TOPICS),
        "g",
        Subscription(("t",)),
        instance_id=None,
        client_id=name,
        session_timeout_ms=10_000,
        max_poll_interval_ms=300_000,
        metadata_max_age_ms=300_000,
        request_timeout_ms=5_000,
        retry=RetryPolicy(timeout_ms=5_000),
    )
    joined.member_id = name
    return joined


def owners(group: GroupMembership) -> dict[str, set[TopicPartition]]:
    description = group.describe("g")
    assert description is not None
    return {m.member_id: set(m.assigned) | set(m.revoking) for m in description.members}


def test_partitions_handed_to_the_consumer_count_as_owned_before_it_acknowledges() -> None:
    """B's consumer thread has been handed all four partitions and is reading them, but has
    not acknowledged yet, when C joins and two of them move to C: B's heartbeats must say
    it owns all four, or the coordinator would take B's revocation as done and C would
    read two partitions B is still reading."""
    group = coordinator()
    b, c = member(group, "b"), member(group, "c")
    b._beat()  # joins: all four
    handed = b.pending_changes()
    assert len(handed.assigned) == 4
    c._beat()  # joins: two of b's are now c's target
    for _ in range(3):
        b._beat()
        c._beat()
    assert owners(group)["c"] == set()  # b has not given anything up
    assert b.acknowledge(handed)  # b's thread took the four
    revoke = b.pending_changes()
    assert len(revoke.revoked) == 2
    assert b.acknowledge(revoke)  # ... and gave two up
    b._beat()
    c._beat()
    assert len(owners(group)["c"]) == 2
    assert owners(group)["b"].isdisjoint(owners(group)["c"])


def test_a_lost_member_joins_again_only_after_its_consumer_took_the_loss() -> None:
    """Until poll() has run on-lost, the member must not be given anything: a commit made
    in on-lost would otherwise carry the new generation and be accepted."""
    clock = Clock()
    group = coordinator(clock)
    b = member(group, "b")
    b._beat()
    assert b.acknowledge(b.pending_changes())
    clock.now_s += 11  # b's session expires at the coordinator
    group.expire()
    b.start()  # its heartbeat thread hears UnknownMemberIdError, then waits
    deadline = time.monotonic() + 5
    while not b.changed.is_set():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.3)
    assert "b" not in owners(group)  # not joined again yet
    taken = b.pending_changes()
    assert len(taken.lost) == 4
    assert taken.member.member_epoch == JOIN_EPOCH  # commits in on-lost are refused
    deadline = time.monotonic() + 5
    while "b" not in owners(group):  # now it joins again
        assert time.monotonic() < deadline
        time.sleep(0.01)
    b.leave()
