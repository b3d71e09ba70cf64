"""The leader's replica set: the high watermark waits for every in-sync replica, ISR
changes follow KIP-497 (an addition counts at once, a removal once written), a stale broker
epoch never joins (KIP-903), and writes below min ISR are refused."""

from __future__ import annotations

import pytest

from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.replication.fetch_calls import LogKind
from twinlog.engine.replication.replica_set import ReplicaSet

LAG_MS = 6000


def _leader(isr: dict[int, int] | None = None, now_ms: int = 0) -> ReplicaSet:
    return ReplicaSet(
        "t-0",
        1,
        (1, 2, 3),
        {1: 10, 2: 20, 3: 30} if isr is None else isr,
        min_insync_replicas=2,
        lag_time_max_ms=LAG_MS,
        now_ms=now_ms,
        epoch_start_offsets={LogKind.DATA: 0},
    )


def test_the_high_watermark_is_what_every_isr_member_holds() -> None:
    replicas = _leader()
    assert replicas.high_watermark_candidate(100) == 0  # nobody fetched yet
    replicas.record_fetch(2, 20, 80, 100, now_ms=1)
    assert replicas.high_watermark_candidate(100) == 0  # 3 has not fetched
    replicas.record_fetch(3, 30, 60, 100, now_ms=1)
    assert replicas.high_watermark_candidate(100) == 60
    replicas.record_fetch(3, 30, 100, 100, now_ms=2)
    assert replicas.high_watermark_candidate(100) == 80
    assert replicas.high_watermark_candidate(70) == 70  # never past the leader's end


def test_a_lagging_follower_is_removed_only_once_the_removal_is_written() -> None:
    replicas = _leader(now_ms=1000)  # every ISR member counts as caught up at the take-over
    replicas.record_fetch(2, 20, 100, 100, now_ms=1000)
    replicas.record_fetch(3, 30, 10, 100, now_ms=1000)  # behind, and stays behind
    replicas.record_fetch(2, 20, 100, 100, now_ms=1000 + LAG_MS)
    assert replicas.isr_change_due(1000 + LAG_MS, {LogKind.DATA: 10}, {2: 20, 3: 30}) is None
    change = replicas.isr_change_due(1001 + LAG_MS, {LogKind.DATA: 10}, {2: 20, 3: 30})
    assert change is not None and change.removed == {3} and dict(change.isr) == {1: 10, 2: 20}
    replicas.propose(change)
    assert replicas.high_watermark_candidate(100) == 10  # 3 still counts while in flight
    assert replicas.isr_change_due(10**9, {LogKind.DATA: 10}, {}) is None  # one change at a time
    replicas.confirm(change.isr)
    assert replicas.high_watermark_candidate(100) == 100


def test_a_caught_up_follower_joins_and_counts_as_soon_as_proposed() -> None:
    replicas = _leader({1: 10, 2: 20})
    replicas.record_fetch(2, 20, 50, 50, now_ms=5)
    replicas.record_fetch(3, 31, 40, 50, now_ms=5)
    assert (
        replicas.isr_change_due(5, {LogKind.DATA: 50}, {2: 20, 3: 31}) is None
    )  # below the HW yet
    replicas.record_fetch(3, 31, 50, 50, now_ms=6)
    change = replicas.isr_change_due(6, {LogKind.DATA: 50}, {2: 20, 3: 31})
    assert change is not None and change.added == {3} and change.isr[3] == 31
    replicas.propose(change)
    assert replicas.high_watermark_candidate(60) == 50  # 3 holds it back at once
    replicas.confirm(change.isr)
    assert replicas.isr == {1: 10, 2: 20, 3: 31}


def test_a_former_incarnation_never_joins() -> None:
    """KIP-903: broker 3 restarted (new broker epoch 33, maybe an empty disk); a fetch of its
    old incarnation (epoch 31) reaching the leader late must not put it in the ISR."""
    replicas = _leader({1: 10, 2: 20})
    replicas.record_fetch(3, 31, 50, 50, now_ms=1)
    assert replicas.isr_change_due(1, {LogKind.DATA: 50}, {2: 20, 3: 33}) is None
    assert replicas.isr_change_due(1, {LogKind.DATA: 50}, {2: 20}) is None  # not registered at all


def test_min_isr_and_strangers() -> None:
    replicas = _leader({1: 10, 2: 20})
    assert replicas.enough_in_sync()
    replicas.confirm({1: 10})
    assert not replicas.enough_in_sync()
    with pytest.raises(NotLeaderOrFollowerError, match="not a replica"):
        replicas.record_fetch(7, 70, 0, 0, now_ms=0)
    with pytest.raises(AssertionError, match="left its own ISR"):
        replicas.confirm({2: 20})
