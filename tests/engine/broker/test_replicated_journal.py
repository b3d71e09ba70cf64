"""Transactions on replicated partitions (CLUSTER.md §3.4), with three cluster brokers in one
process, a coordinator on one of them reaching the partition's leader wherever it is:

    J1  a replica applies to LMDB only journal-log records below the journal's high watermark
    J2  a transactional batch is acknowledged once its ENTRY is committed
    J4  the copy is replicated before MARK_APPLIED; a replica holding the copy holds APPLYING
    J5  followers never copy: their LMDB follows the leader's committed records
    J6  a new leader, once through the promotion barrier, finishes a half-done copy

and the failure cases F3 (leader dies between APPLYING and the copy), F5 (after the copy,
before APPLIED) and F6 (an unacknowledged entry on one follower, the other elected)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import wait_for as wait_for_slowly
from replication_support import TOPIC, Cluster

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
)
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.journal import CopyState

NAME = str(TOPIC)
IN_PROCESS_POLL_S = 0.005  # brokers in this process answer in milliseconds


def wait_for(what: str, probe: Callable[[], object]) -> None:
    wait_for_slowly(what, probe, timeout_s=10.0, poll_s=IN_PROCESS_POLL_S)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    yield opened
    failpoints.disarm_all()
    opened.close()


def _begin(coordinator: Broker) -> tuple[ProducerIdentity, int]:
    identity = coordinator.init_producer("loader")
    transaction_id = coordinator.begin_transaction(
        identity.producer_id, identity.producer_generation
    )
    return identity, transaction_id


def _send(
    leader: Broker, identity: ProducerIdentity, transaction_id: int, sequence: int, value: bytes
) -> None:
    leader.produce(
        TOPIC.topic,
        0,
        batch([value], identity, sequence=sequence, transaction_id=transaction_id),
        transaction_id=transaction_id,
    )


def _commit(coordinator: Broker, identity: ProducerIdentity, transaction_id: int) -> None:
    coordinator.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )


def _replicas_identical(cluster: Cluster, members: tuple[int, ...] = (1, 2, 3)) -> None:
    """Every replica's data log and journal log byte-identical (after the pump settled)."""

    def same() -> bool:
        data = {cluster.log_bytes(b) for b in members}
        journals = {cluster.journal_log_bytes(b) for b in members}
        return len(data) == 1 and len(journals) == 1

    wait_for("the replicas to hold the same logs", same)


def test_a_transaction_commits_on_every_replica(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(2)  # the coordinator is not the leader
    cluster.start_pumping()
    identity, transaction_id = _begin(coordinator)
    for sequence, value in enumerate([b"a", b"b", b"c"]):
        _send(cluster.brokers[1], identity, transaction_id, sequence, value)
        # J2: acknowledged means committed: the journal's high watermark covers the ENTRY
        journal_log = cluster.brokers[1].journal.journal_log(NAME)
        assert cluster.brokers[1].journal.high_watermark(NAME) == journal_log.log_end_offset
    assert cluster.brokers[1].fetch(TOPIC.topic, 0, 0).records == b""  # not committed yet
    _commit(coordinator, identity, transaction_id)
    assert cluster.values(cluster.brokers[1]) == [b"a", b"b", b"c"]
    # The copy answered once replicated; its MARK_APPLIED waited for a next copy group,
    # and with none the broker's round wrote it alone (``copier.marks_left``).
    wait_for(
        "the leader to write MARK_APPLIED",
        lambda: (
            (r := cluster.brokers[1].journal.transaction(NAME, transaction_id)) is not None
            and r.state is CopyState.APPLIED
        ),
    )
    _replicas_identical(cluster)
    leader_record = cluster.brokers[1].journal.transaction(NAME, transaction_id)
    assert leader_record is not None and leader_record.state is CopyState.APPLIED
    for follower in (2, 3):  # J5: the followers' LMDB followed the leader's records
        wait_for(
            "the follower to apply MARK_APPLIED",
            lambda f=follower: (
                (r := cluster.brokers[f].journal.transaction(NAME, transaction_id)) is not None
                and r.state is CopyState.APPLIED
            ),
        )
        record = cluster.brokers[follower].journal.transaction(NAME, transaction_id)
        assert record is not None and record.applied_range == leader_record.applied_range


def test_an_unacknowledged_entry_is_cut_and_the_retry_appears_once(cluster: Cluster) -> None:
    """F6, walkthrough 2: the entry reached the leader and follower 2 only; follower 3 is
    elected; 2 cuts the entry (never applied: J1); the producer's retry appears once."""
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(2)
    cluster.start_pumping()
    identity, transaction_id = _begin(coordinator)
    _send(cluster.brokers[1], identity, transaction_id, 0, b"acknowledged")
    wait_for(
        "follower 3 to apply the acknowledged entry",
        lambda: cluster.brokers[3].journal.transaction(NAME, transaction_id) is not None,
    )
    cluster.cut = {3}
    with pytest.raises(NotEnoughReplicasAfterAppendError, match="journal-log"):
        _send(cluster.brokers[1], identity, transaction_id, 1, b"in doubt")
    held_by_2 = cluster.brokers[2].journal.journal_log(NAME).log_end_offset
    assert held_by_2 == cluster.brokers[1].journal.journal_log(NAME).log_end_offset
    record = cluster.brokers[2].journal.transaction(NAME, transaction_id)
    assert record is not None and record.entry_count == 1  # J1: not applied, not committed
    # Broker 1 dies; the controller elects 3 (in the ISR) at epoch 2.
    cluster.stop_pumping()
    cluster.cut = {1}
    cluster.roles(leader=3, epoch=2, isr=(2, 3))
    cluster.start_pumping()
    _send(cluster.brokers[3], identity, transaction_id, 1, b"in doubt")  # the retry
    _commit(coordinator, identity, transaction_id)
    assert cluster.values(cluster.brokers[3]) == [b"acknowledged", b"in doubt"]
    _replicas_identical(cluster, (2, 3))
    # Broker 1 restarts as a follower: it cuts its own copy of the entry and catches up.
    cluster.cut = set()
    cluster.roles(leader=3, epoch=2, isr=(2, 3), to=[1])
    _replicas_identical(cluster)
    assert cluster.values(cluster.brokers[1]) == [b"acknowledged", b"in doubt"]


def test_a_retry_at_the_same_leader_after_an_unanswered_wait_is_a_duplicate(
    cluster: Cluster,
) -> None:
    """The entry is in the leader's journal log but its replicas did not answer in time
    (NotEnoughReplicasAfterAppendError); the producer retries at the same leader. The
    retry is a duplicate (the sequence was recorded on append, as Kafka does), answered
    once the first entry is committed, and the commit copies the batch once. (Found by
    the cluster nemesis: the retry was journaled as a second entry and copied twice.)"""
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(2)
    cluster.start_pumping()
    identity, transaction_id = _begin(coordinator)
    _send(cluster.brokers[1], identity, transaction_id, 0, b"first")
    cluster.cut = {3}  # follower 3 in the ISR does not fetch: the next wait times out
    with pytest.raises(NotEnoughReplicasAfterAppendError, match="journal-log"):
        _send(cluster.brokers[1], identity, transaction_id, 1, b"in doubt")
    cluster.cut = set()  # 3 fetches again: the entry becomes committed
    _send(cluster.brokers[1], identity, transaction_id, 1, b"in doubt")  # the retry
    record = cluster.brokers[1].journal.transaction(NAME, transaction_id)
    assert record is not None and record.entry_count == 2  # not 3
    _commit(coordinator, identity, transaction_id)
    assert cluster.values(cluster.brokers[1]) == [b"first", b"in doubt"]
    _replicas_identical(cluster)


def test_an_entry_the_new_leader_holds_is_committed_and_the_retry_is_a_duplicate(
    cluster: Cluster,
) -> None:
    """F6, the other election: follower 2 held the entry and leads; its barrier commits it."""
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(3)
    cluster.start_pumping()
    identity, transaction_id = _begin(coordinator)
    _send(cluster.brokers[1], identity, transaction_id, 0, b"acknowledged")
    cluster.cut = {3}
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        _send(cluster.brokers[1], identity, transaction_id, 1, b"in doubt")
    cluster.stop_pumping()
    cluster.cut = {1}
    cluster.roles(leader=2, epoch=2, isr=(2, 3))
    cluster.start_pumping()
    _send(cluster.brokers[2], identity, transaction_id, 1, b"in doubt")  # a duplicate now
    _commit(coordinator, identity, transaction_id)
    assert cluster.values(cluster.brokers[2]) == [b"acknowledged", b"in doubt"]
    _replicas_identical(cluster, (2, 3))


@pytest.mark.parametrize(
    "failpoint", ["copier.after_applying_record", "copier.after_log_fsync"], ids=["F3", "F5"]
)
def test_a_leader_dying_mid_apply_is_finished_once_by_the_next(
    cluster: Cluster, failpoint: str
) -> None:
    """F3: the leader dies with APPLYING committed and nothing copied: the new leader copies.
    F5: it dies after the copy reached the followers, before APPLIED: the new leader
    records APPLIED and copies nothing again (J4, J6)."""
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(3)
    cluster.start_pumping()
    cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"before"]))
    identity, transaction_id = _begin(coordinator)
    for sequence, value in enumerate([b"t1", b"t2"]):
        _send(cluster.brokers[1], identity, transaction_id, sequence, value)
    failpoints.arm(failpoint)
    # Decided (PREPARE_COMMIT durable); the first APPLY crashes the leader at the failpoint,
    # and the coordinator retries it until a leader answers.
    coordinator.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation
    )
    wait_for("broker 1 to crash at the failpoint", lambda: 1 in cluster.crashed)
    # Its followers fetch what it wrote before it died, then it is gone.
    leader_ends = (
        cluster.partition(1).log.log_end_offset,
        cluster.brokers[1].journal.journal_log(NAME).log_end_offset,
    )
    wait_for(
        "the followers to hold what broker 1 wrote",
        lambda: all(
            (
                cluster.partition(b).log.log_end_offset,
                cluster.brokers[b].journal.journal_log(NAME).log_end_offset,
            )
            == leader_ends
            for b in (2, 3)
        ),
    )
    applying = cluster.brokers[2].journal.transaction(NAME, transaction_id)
    cluster.stop_pumping()
    cluster.cut = {1}
    cluster.roles(leader=2, epoch=2, isr=(2, 3))
    cluster.start_pumping()
    wait_for(
        "the coordinator's retried APPLY to finish at the new leader",
        lambda: (
            (r := cluster.brokers[2].journal.transaction(NAME, transaction_id)) is not None
            and r.state is CopyState.APPLIED
        ),
    )
    assert applying is None or applying.state in (CopyState.OPEN, CopyState.APPLYING)
    assert cluster.values(cluster.brokers[2]) == [b"before", b"t1", b"t2"]  # once, contiguous
    _replicas_identical(cluster, (2, 3))
    cluster.cut = set()
    cluster.roles(leader=2, epoch=2, isr=(2, 3), to=[1])
    _replicas_identical(cluster)


def test_a_new_leader_acts_only_after_the_promotion_barrier(cluster: Cluster) -> None:
    cluster.roles(leader=1, epoch=1)
    cluster.start_pumping()
    cluster.brokers[1].produce(TOPIC.topic, 0, batch([b"x"]))
    cluster.stop_pumping()
    cluster.cut = {1, 3}  # 3 is in the ISR and does not fetch: the barrier cannot pass
    cluster.roles(leader=2, epoch=2, isr=(2, 3), to=[2])
    with pytest.raises(NotLeaderOrFollowerError, match="promotion"):
        cluster.brokers[2].produce(TOPIC.topic, 0, batch([b"y"]))
    cluster.cut = {1}
    cluster.roles(leader=2, epoch=2, isr=(2, 3), to=[3])
    cluster.start_pumping()
    cluster.brokers[2].produce(TOPIC.topic, 0, batch([b"y"]))
    assert cluster.values(cluster.brokers[2]) == [b"x", b"y"]


def test_a_follower_appends_no_record_of_its_own(cluster: Cluster) -> None:
    """J5: a follower's journal log takes its leader's records only; a write of its own
    (a purge at start, a late coordinator call) is refused before anything is appended."""
    cluster.roles(leader=1, epoch=1)
    follower = cluster.brokers[2].journal
    end = follower.journal_log(NAME).log_end_offset
    with pytest.raises(NotLeaderOrFollowerError, match="does not lead"):
        follower.mark_aborted(NAME, 7)
    with pytest.raises(NotLeaderOrFollowerError, match="does not lead"):
        follower.purge_partition_below(NAME, 10**6)
    assert follower.journal_log(NAME).log_end_offset == end


def test_a_copy_waits_for_an_uncommitted_mark_of_another_before_it_begins(
    cluster: Cluster,
) -> None:
    """Found by the 1,000-fault nemesis run: T1's MARK_APPLYING reached the leader's journal
    log but not its replicas (the wait failed); T2's copy then began beside it, and once
    the followers came back both marks committed: two APPLYING transactions, every later
    copy refused. Now T2's copy first waits for the whole journal log to be committed, so
    recovery finishes T1 first, and both commit."""
    cluster.roles(leader=1, epoch=1)
    coordinator = cluster.use_coordinator(2)
    cluster.start_pumping()
    first_producer = coordinator.init_producer("first")
    second_producer = coordinator.init_producer("second")
    transactions = []
    for identity in (first_producer, second_producer):
        transaction_id = coordinator.begin_transaction(
            identity.producer_id, identity.producer_generation
        )
        _send(cluster.brokers[1], identity, transaction_id, 0, b"from %d" % identity.producer_id)
        transactions.append((identity, transaction_id))
    cluster.cut = {2, 3}  # the followers stop fetching TOPIC: nothing of it commits
    for identity, transaction_id in transactions:  # PREPARE; each APPLY fails and is retried
        coordinator.commit_transaction(
            transaction_id, identity.producer_id, identity.producer_generation
        )
    time.sleep(3)  # > replica_ack_timeout_ms: both copies were tried and failed meanwhile
    cluster.cut = set()
    for _identity, transaction_id in transactions:
        wait_for(
            f"transaction {transaction_id} applied on the leader",
            lambda t=transaction_id: (
                (r := cluster.brokers[1].journal.transaction(NAME, t)) is not None
                and r.state is CopyState.APPLIED
            ),
        )
    assert sorted(cluster.values(cluster.brokers[1])) == sorted(
        b"from %d" % identity.producer_id for identity, _ in transactions
    )
