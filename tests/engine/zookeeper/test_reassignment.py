"""The reassignment rules as pure functions (KIP-455 on the partition state): start,
complete once every target replica is in sync, cancel back, and the state's format."""

from __future__ import annotations

from dataclasses import replace

import pytest

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.replication.fetch_throttle import FetchThrottle
from twinlog.engine.zookeeper.leader_election import settled_state
from twinlog.engine.zookeeper.partition_state import IsrMember, PartitionState
from twinlog.engine.zookeeper.reassignment import (
    cancel_state,
    reassignment_step,
    start_state,
)

EPOCHS = {1: 11, 2: 12, 3: 13, 4: 14}  # broker id -> broker epoch, all alive


def state(leader: int, isr: list[int], replicas: list[int], epoch: int = 5) -> PartitionState:
    members = tuple(IsrMember(b, EPOCHS[b]) for b in isr)
    return PartitionState(leader, epoch, members, tuple(replicas), 1, version=9)


def test_a_move_lists_the_target_first_then_those_leaving_and_bumps_the_epoch() -> None:
    before = state(1, [1, 2, 3], [1, 2, 3])
    moving = start_state(before, (2, 3, 4), 2048, controller_epoch=8)
    assert moving is not None
    assert moving.replicas == (2, 3, 4, 1)
    assert (moving.adding, moving.removing) == ((4,), (1,))
    assert (moving.original, moving.target) == ((1, 2, 3), (2, 3, 4))
    assert moving.leader == 1 and moving.isr == before.isr  # nothing moves yet
    assert moving.leader_epoch == 6 and moving.controller_epoch == 8
    assert moving.throttle_bytes_per_s == 2048 and moving.version == 9
    assert start_state(before, (1, 2, 3), 0, 8) is None  # there already
    with pytest.raises(ValueError):
        start_state(before, (2, 2), 0, 8)
    with pytest.raises(ValueError):
        start_state(before, (), 0, 8)


def test_it_completes_only_once_every_target_replica_is_in_sync_and_alive() -> None:
    moving = start_state(state(1, [1, 2, 3], [1, 2, 3]), (2, 3, 4), 0, 8)
    assert moving is not None
    assert reassignment_step(moving, EPOCHS, set(), 8) is None  # 4 is not in the ISR yet
    caught_up = replace(moving, isr=(*moving.isr, IsrMember(4, EPOCHS[4])))
    restarted = {**EPOCHS, 4: 99}  # 4 in sync under an older incarnation: not yet
    assert reassignment_step(caught_up, restarted, set(), 8) is None
    done = reassignment_step(caught_up, EPOCHS, set(), 8)
    assert done is not None
    assert done.replicas == (2, 3, 4) and not done.reassigning
    assert done.isr_ids == (2, 3, 4)  # the leaving replica left the ISR with it
    assert done.leader == 2  # the leader left: the first target replica in sync leads
    assert done.leader_epoch == moving.leader_epoch + 1
    assert done.throttle_bytes_per_s == 0


def test_a_leader_that_stays_keeps_leading_and_one_shutting_down_hands_over() -> None:
    moving = start_state(state(2, [1, 2, 3], [1, 2, 3]), (2, 3), 0, 8)  # only shrinks
    assert moving is not None and moving.adding == () and moving.removing == (1,)
    done = reassignment_step(moving, EPOCHS, set(), 8)
    assert done is not None and done.leader == 2 and done.replicas == (2, 3)
    handed = reassignment_step(moving, EPOCHS, {2}, 8)
    assert handed is not None and handed.leader == 3


def test_a_new_order_alone_completes_at_once() -> None:
    reordered = start_state(state(1, [1, 2, 3], [1, 2, 3]), (3, 2, 1), 0, 8)
    assert reordered is not None
    assert reordered.replicas == (3, 2, 1) and not reordered.reassigning
    assert reordered.leader == 1  # still in sync: no leader change is forced


def test_a_cancel_goes_back_to_the_original_replicas() -> None:
    moving = start_state(state(1, [1, 2, 3], [1, 2, 3]), (2, 3, 4), 0, 8)
    assert moving is not None
    with_newcomer = replace(moving, isr=(*moving.isr, IsrMember(4, EPOCHS[4])))
    back = cancel_state(with_newcomer, set(), 8)
    assert back is not None
    assert back.replicas == (1, 2, 3) and back.isr_ids == (1, 2, 3) and back.leader == 1
    assert not back.reassigning and back.leader_epoch == moving.leader_epoch + 1
    assert cancel_state(back, set(), 8) is None  # nothing runs
    # No original replica in sync: a cancel would leave the partition without one.
    only_new = replace(moving, leader=4, isr=(IsrMember(4, EPOCHS[4]),))
    assert cancel_state(only_new, set(), 8) is None


def test_a_new_target_while_one_runs_starts_from_the_same_original() -> None:
    moving = start_state(state(1, [1, 2, 3], [1, 2, 3]), (2, 3, 4), 0, 8)
    assert moving is not None
    again = start_state(moving, (1, 2, 4), 0, 8)
    assert again is not None
    assert (again.original, again.target) == ((1, 2, 3), (1, 2, 4))
    assert (again.adding, again.removing) == ((4,), (3,))


def test_leader_elections_keep_a_running_reassignment() -> None:
    moving = start_state(state(1, [1, 2, 3], [1, 2, 3]), (2, 3, 4), 0, 8)
    assert moving is not None
    leader_died = settled_state(moving, {2: 12, 3: 13, 4: 14}, set(), 8)
    assert leader_died is not None and leader_died.leader == 2
    assert (leader_died.adding, leader_died.removing) == ((4,), (1,))


def test_the_state_reads_back_as_written_and_refuses_what_cannot_be() -> None:
    moving = start_state(state(1, [1, 2, 3], [1, 2, 3]), (2, 3, 4), 4096, 8)
    assert moving is not None
    path = "/topics/t/partitions/0/state"
    assert PartitionState.decode(path, moving.encode(), 9) == moving
    plain = state(1, [1, 2], [1, 2])
    assert b"adding" not in plain.encode()  # unchanged for a partition that does not move
    assert PartitionState.decode(path, plain.encode(), 9) == plain
    bad = moving.encode().replace(b'"removing":[1]', b'"removing":[9]')
    with pytest.raises(CorruptJournalError, match="disjoint subsets"):
        PartitionState.decode(path, bad, 9)


def test_the_fetch_throttle_holds_the_rate_over_time() -> None:
    now = [100.0]
    throttle = FetchThrottle(1000, clock_s=lambda: now[0])
    assert throttle.may_fetch()
    throttle.copied(3000)  # three seconds' worth in one answer
    assert not throttle.may_fetch()
    now[0] += 2.9
    assert not throttle.may_fetch()
    now[0] += 0.2
    assert throttle.may_fetch()
    with pytest.raises(ValueError):
        FetchThrottle(0)
