"""The controller's rules as pure functions: replica assignment, clean election from the
ISR only, the last ISR member kept and brought back, controlled shutdown."""

from __future__ import annotations

import zlib

import pytest

from twinlog.engine.zookeeper.controller_epoch import chunks
from twinlog.engine.zookeeper.leader_election import (
    assign_replicas,
    imbalanced_partitions,
    initial_state,
    next_state,
    preferred_leader_state,
    settled_state,
)
from twinlog.engine.zookeeper.partition_state import NO_LEADER, IsrMember, PartitionState

CONTROLLER_EPOCH = 7


def state(
    leader: int, epoch: int, isr: list[tuple[int, int]], replicas: list[int]
) -> PartitionState:
    members = tuple(IsrMember(broker_id, broker_epoch) for broker_id, broker_epoch in isr)
    return PartitionState(leader, epoch, members, tuple(replicas), 1, version=3)


def test_replicas_are_consecutive_brokers_from_a_hashed_start() -> None:
    brokers = [30, 10, 20]
    start = zlib.crc32(b"orders") % 3
    ordered = [10, 20, 30]
    assignment = assign_replicas("orders", 4, 2, brokers)
    for partition, replicas in enumerate(assignment):
        first = (start + partition) % 3
        assert replicas == (ordered[first], ordered[(first + 1) % 3])
    with pytest.raises(ValueError):
        assign_replicas("orders", 1, 4, brokers)


def test_a_new_partition_is_led_by_its_first_replica_with_every_replica_in_sync() -> None:
    new = initial_state((2, 3), {2: 100, 3: 200}, CONTROLLER_EPOCH)
    assert (new.leader, new.leader_epoch, new.controller_epoch) == (2, 0, CONTROLLER_EPOCH)
    assert new.isr == (IsrMember(2, 100), IsrMember(3, 200))


def test_a_dead_leader_is_replaced_by_the_next_live_isr_member_in_assignment_order() -> None:
    old = state(1, 4, [(1, 10), (3, 30), (2, 20)], [1, 2, 3])
    new = next_state(old, {2: 20, 3: 30}, set(), CONTROLLER_EPOCH)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr_ids) == (2, 5, (3, 2))
    assert new.controller_epoch == CONTROLLER_EPOCH and new.version == old.version


def test_a_dead_follower_leaves_the_isr_without_a_leader_change() -> None:
    old = state(1, 4, [(1, 10), (2, 20)], [1, 2])
    new = next_state(old, {1: 10}, set(), CONTROLLER_EPOCH)
    assert new is not None and (new.leader, new.leader_epoch, new.isr_ids) == (1, 4, (1,))
    assert next_state(new, {1: 10}, set(), CONTROLLER_EPOCH) is None  # settled


def test_a_live_replica_outside_the_isr_is_never_elected() -> None:
    old = state(1, 4, [(1, 10)], [1, 2])
    new = next_state(old, {2: 20}, set(), CONTROLLER_EPOCH)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (NO_LEADER, 5, (IsrMember(1, 10),))


def test_when_every_member_dies_the_isr_keeps_the_leader() -> None:
    old = state(2, 4, [(1, 10), (2, 20)], [1, 2])
    new = next_state(old, {}, set(), CONTROLLER_EPOCH)
    assert new is not None and (new.leader, new.isr_ids) == (NO_LEADER, (2,))


def test_the_last_member_returning_with_a_new_broker_epoch_leads_again() -> None:
    offline = state(NO_LEADER, 5, [(2, 20)], [1, 2])
    assert next_state(offline, {1: 11}, set(), CONTROLLER_EPOCH) is None  # 1 is not in the ISR
    new = next_state(offline, {1: 11, 2: 21}, set(), CONTROLLER_EPOCH)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (2, 6, (IsrMember(2, 21),))


def test_a_restarted_broker_is_a_dead_member_and_a_sole_leader_comes_back_in_one_step() -> None:
    old = state(1, 4, [(1, 10), (2, 20)], [1, 2])
    new = next_state(old, {1: 12, 2: 20}, set(), CONTROLLER_EPOCH)  # 1 restarted: epoch 12
    assert new is not None and (new.leader, new.leader_epoch, new.isr_ids) == (2, 5, (2,))
    sole = state(1, 4, [(1, 10)], [1])
    settled = settled_state(sole, {1: 12}, set(), CONTROLLER_EPOCH)
    assert settled is not None
    assert (settled.leader, settled.leader_epoch, settled.isr) == (1, 5, (IsrMember(1, 12),))


def test_controlled_shutdown_moves_leadership_and_leaves_isrs_it_can() -> None:
    live = {1: 10, 2: 20, 3: 30}
    led = state(1, 4, [(1, 10), (2, 20), (3, 30)], [1, 3, 2])
    new = next_state(led, live, {1}, CONTROLLER_EPOCH)
    assert new is not None and (new.leader, new.leader_epoch, new.isr_ids) == (3, 5, (2, 3))
    followed = state(2, 4, [(2, 20), (1, 10)], [2, 1])
    new = next_state(followed, live, {1}, CONTROLLER_EPOCH)
    assert new is not None and (new.leader, new.leader_epoch, new.isr_ids) == (2, 4, (2,))
    alone = state(1, 4, [(1, 10)], [1, 2])
    assert next_state(alone, live, {1}, CONTROLLER_EPOCH) is None


def test_chunks_keep_groups_whole_within_the_limit() -> None:
    groups = [[0] * 3, [0] * 3, [0], [0] * 5, [0] * 2]
    assert chunks(groups, limit=6) == [[0, 1], [2, 3], [4]]  # type: ignore[arg-type]
    assert chunks([], limit=6) == []


def test_the_preferred_leader_takes_over_only_when_alive_in_sync_and_staying() -> None:
    led_by_two = state(2, 4, [(1, 100), (2, 200), (3, 300)], [1, 2, 3])
    live = {1: 100, 2: 200, 3: 300}
    back = preferred_leader_state(led_by_two, live, set(), CONTROLLER_EPOCH)
    assert back is not None
    assert (back.leader, back.leader_epoch, back.isr) == (1, 5, led_by_two.isr)
    assert back.controller_epoch == CONTROLLER_EPOCH and back.version == led_by_two.version
    # Led by it already; restarted (another broker epoch); shutting down; out of the ISR.
    assert preferred_leader_state(back, live, set(), CONTROLLER_EPOCH) is None
    assert preferred_leader_state(led_by_two, {**live, 1: 101}, set(), CONTROLLER_EPOCH) is None
    assert preferred_leader_state(led_by_two, live, {1}, CONTROLLER_EPOCH) is None
    out = state(2, 4, [(2, 200), (3, 300)], [1, 2, 3])
    assert preferred_leader_state(out, live, set(), CONTROLLER_EPOCH) is None


def test_a_broker_is_imbalanced_above_the_percentage_of_its_preferred_partitions() -> None:
    # Broker 1 is preferred for 4 partitions and leads 3 (25 % not led); broker 2 for 1,
    # led by 3 (100 %); broker 3 for 1, which it leads.
    states = [
        ("a", 0, state(1, 0, [(1, 1)], [1, 2])),
        ("a", 1, state(1, 0, [(1, 1)], [1, 2])),
        ("a", 2, state(1, 0, [(1, 1)], [1, 3])),
        ("a", 3, state(3, 1, [(1, 1), (3, 3)], [1, 3])),
        ("b", 0, state(3, 1, [(2, 2), (3, 3)], [2, 3])),
        ("b", 1, state(3, 0, [(3, 3)], [3, 1])),
    ]
    assert imbalanced_partitions(states, 10) == {("a", 3), ("b", 0)}
    assert imbalanced_partitions(states, 25) == {("b", 0)}  # 25 % is not above 25 %
    assert imbalanced_partitions(states, 100) == set()
