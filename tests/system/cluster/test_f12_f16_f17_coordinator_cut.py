"""A transaction coordinator paused, cut from a partition leader, or deposed while a
client still names it.

F16: the coordinator is cut from one partition leader of a transaction (that leader's
inbound proxy holds) when the commit is asked for. A commit first counts each
partition's journal entries (CountEntries) before PREPARE_COMMIT, so it stays undecided:
the coordinator's calls time out, the client retries the commit, the partition shows
nothing of it; once the link heals the commit completes and is applied once and whole.
A cut after PREPARE_COMMIT and before the APPLY reaches that leader would need a pause
at that step (the failpoints only crash), so it is not timed here: F7's after_prepare
kill covers a prepared commit whose APPLY never left.
F12: the same, and the coordinator's broker is paused past its session with the commit
in flight there: a new coordinator (next epoch) loads, the client follows and commits
there; its next transaction, sent while the paused broker is still named leader of one
of its partitions in the client's metadata, follows that partition's new leader within a
few request timeouts (the paused broker is also the first of the client's bootstrap list,
asked first for metadata and FindCoordinator: a client that asked it again at each
attempt never found the new coordinator); the paused one, resumed, goes on at the old epoch (its calls
refused, its journal writes unacknowledged) and exits on its lost session; nothing
duplicated.
F17: the coordinator's broker is cut from ZooKeeper while a producer keeps committing:
the producer's cached coordinator, and FindCoordinator answered by the deposed broker
itself, point at a broker that can no longer commit anything; the producer follows
(NotCoordinator / LoadInProgress / timeouts) to the new coordinator, and every
transaction ends committed, or unknown and then all-or-nothing.

A client cut from the coordinator alone, while brokers still reach it:
``test_f17_client_cut.py``."""

from __future__ import annotations

import threading
import time

import pytest
from cluster_checks import check_replicas_agree, check_transactions
from cluster_faults import (
    EXPIRY_S,
    WAIT_S,
    FaultCluster,
    exited_on_session_loss,
    holds_throughout,
    wait_until,
)
from cluster_workload import (
    COMMITTED,
    TXN_API_TIMEOUT_MS,
    TXN_REQUEST_TIMEOUT_MS,
    UNKNOWN,
    TransactionalWriter,
)

from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.records.batch_reader import iter_batches

pytestmark = [pytest.mark.slow, pytest.mark.crash]

PARTITIONS = 3
CUT_S = 6.0  # how long the APPLY stays held in F16 (the coordinator retries meanwhile)
# A transaction whose partition leader is paused and replaced: its send there times out
# (a request timeout), the metadata refresh may ask the paused broker first (another),
# then the retry at the new leader and the commit; a request timeout per step, and one
# to spare. A producer that kept retrying at the paused broker would take its delivery
# timeout (TXN_API_TIMEOUT_MS), or until gRPC's keepalive dropped the connection.
FOLLOW_S = 4 * TXN_REQUEST_TIMEOUT_MS / 1000


def _layout(cluster: FaultCluster, topic: str) -> tuple[int, dict[int, int]]:
    cluster.create_topic(topic, PARTITIONS)
    cluster.wait_in_sync(TXN_JOURNAL_TOPIC)
    coordinator = cluster.coordinator().leader
    leaders = {}
    for partition in range(PARTITIONS):
        state = cluster.state(topic, partition)
        assert state is not None
        leaders[partition] = state.leader
    return coordinator, leaders


def _values_at(cluster: FaultCluster, broker_id: int, topic: str, partition: int) -> set[bytes]:
    """What broker ``broker_id`` serves of the partition now (straight, never proxied)."""
    found: set[bytes] = set()
    with cluster.client(broker_id) as remote:
        offset = 0
        while True:
            records = remote.fetch(topic, partition, offset, max_wait_ms=0).records
            batches = list(iter_batches(records))
            if not batches:
                return found
            for one in batches:
                found.update(r.value for r in one.records() if r.value is not None)
                offset = one.header.next_offset


class CutCommit:
    """A transaction whose commit is asked for on a thread of its own right after the
    inbound link of one of its partitions' leaders (not the coordinator's broker) is held:
    the coordinator cannot count that partition's journal entries, so the commit stays
    undecided, retried by the coordinator and the client, until the link heals."""

    def __init__(self, cluster: FaultCluster, topic: str, tag: str) -> None:
        self.cluster = cluster
        self.coordinator, leaders = _layout(cluster, topic)
        self.leaders = leaders
        self.partition, self.cut = next(
            (p, leader) for p, leader in leaders.items() if leader != self.coordinator
        )
        # The coordinator's broker first in the bootstrap list: the client asks it first
        # for metadata and FindCoordinator too, so F12 pauses the broker it asks first.
        self.writer = TransactionalWriter(
            cluster, topic, PARTITIONS, tag, bootstrap=cluster.bootstrap_from(self.coordinator)
        )
        assert self.writer.run_one().outcome == COMMITTED  # it caches the coordinator
        self.txn = self.writer.new_txn()
        self.values = set(self.txn.values[self.partition])
        held = threading.Event()

        def hold() -> None:
            cluster.brokers[self.cut].inbound_link.hold()
            held.set()

        self._thread = threading.Thread(
            target=self.writer.run_one, args=(self.txn, False, hold), daemon=True
        )
        self._thread.start()
        assert held.wait(WAIT_S), f"the transaction was not sent: {self.txn.error}"

    def applied_at_cut(self) -> bool:
        return self.values <= _values_at(self.cluster, self.cut, self.writer.topic, self.partition)

    def seen_at_cut(self) -> bool:
        return bool(
            self.values & _values_at(self.cluster, self.cut, self.writer.topic, self.partition)
        )

    def outcome(self) -> str:
        self._thread.join(TXN_API_TIMEOUT_MS / 1000 + 10)
        assert not self._thread.is_alive(), "the commit never returned"
        return self.txn.outcome


def test_f16_coordinator_cut_from_a_partition_leader_commits_after_healing(
    cluster: FaultCluster, topic: str
) -> None:
    commit = CutCommit(cluster, topic, "f16")
    holds_throughout(lambda: not commit.seen_at_cut(), "nothing applied while cut", CUT_S)
    assert commit.txn.outcome == UNKNOWN  # the commit is still being retried
    cluster.brokers[commit.cut].inbound_link.release()
    assert commit.outcome() == COMMITTED, commit.txn.error
    wait_until(commit.applied_at_cut, "the transaction applied at the healed leader")
    assert cluster.brokers[commit.coordinator].alive
    assert commit.writer.run_one().outcome == COMMITTED
    commit.writer.stop()
    check_transactions(cluster, topic, PARTITIONS, [commit.writer])
    check_replicas_agree(cluster, TXN_JOURNAL_TOPIC)


def test_f12_paused_coordinator_is_replaced_and_its_late_calls_change_nothing(
    cluster: FaultCluster, topic: str
) -> None:
    commit = CutCommit(cluster, topic, "f12")
    zombie = cluster.brokers[commit.coordinator]
    zombie.pause()  # with the commit in flight there, undecided
    successor = cluster.wait_state(
        TXN_JOURNAL_TOPIC,
        lambda s: s.leader not in (-1, commit.coordinator),
        "a new coordinator",
        EXPIRY_S,
    )
    cluster.brokers[commit.cut].inbound_link.release()
    # The client follows to the new coordinator and commits there.
    assert commit.outcome() == COMMITTED, commit.txn.error
    wait_until(commit.applied_at_cut, "the transaction applied")
    # The next one, to every partition, the zombie still paused; the client's metadata
    # still names it leader of the partition it led, which has a new leader by now.
    led = [p for p, leader in commit.leaders.items() if leader == commit.coordinator]
    assert led, f"the coordinator's broker leads no partition of {topic}: {commit.leaders}"
    for partition in led:
        cluster.wait_state(
            topic,
            lambda s: s.leader not in (-1, commit.coordinator),
            "a new leader",
            partition=partition,
        )
    started = time.monotonic()
    following = commit.writer.run_one()
    assert following.outcome == COMMITTED, following.error
    elapsed_s = time.monotonic() - started
    assert elapsed_s < FOLLOW_S, f"{elapsed_s:.0f} s to follow the paused leader's successor"
    zombie.resume()  # its commit handling and calls go on at the old epoch
    assert exited_on_session_loss(zombie.wait_exit(EXPIRY_S)), zombie.log()[-3000:]
    assert cluster.coordinator().leader_epoch >= successor.leader_epoch
    assert commit.writer.run_one().outcome == COMMITTED
    commit.writer.stop()
    cluster.restart(commit.coordinator)
    check_transactions(cluster, topic, PARTITIONS, [commit.writer])
    check_replicas_agree(cluster, TXN_JOURNAL_TOPIC)


def test_f17_producer_follows_a_coordinator_deposed_by_a_zookeeper_cut(
    cluster: FaultCluster, topic: str
) -> None:
    coordinator, _leaders = _layout(cluster, topic)
    deposed = cluster.brokers[coordinator]
    writer = TransactionalWriter(cluster, topic, PARTITIONS, "f17")
    assert writer.run_one().outcome == COMMITTED  # it caches the coordinator
    writer.start()
    wait_until(lambda: writer.committed_count() >= 3, "commits before the cut")
    assert deposed.zookeeper_link is not None
    deposed.zookeeper_link.hold()
    cluster.wait_state(
        TXN_JOURNAL_TOPIC,
        lambda s: s.leader not in (-1, coordinator),
        "a new coordinator",
        EXPIRY_S,
    )
    assert exited_on_session_loss(deposed.wait_exit(EXPIRY_S)), deposed.log()[-3000:]
    before = writer.committed_count()
    wait_until(lambda: writer.committed_count() >= before + 3, "commits at the new coordinator")
    writer.stop()
    outcomes = {txn.outcome for txn in writer.transactions}
    assert outcomes <= {COMMITTED, UNKNOWN}, [
        (t.tag, t.outcome, t.error) for t in writer.transactions
    ]
    cluster.heal()
    check_transactions(cluster, topic, PARTITIONS, [writer])
    check_replicas_agree(cluster, TXN_JOURNAL_TOPIC)
