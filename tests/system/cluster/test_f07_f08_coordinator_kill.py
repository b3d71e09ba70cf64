"""The transaction coordinator's broker SIGKILLed at each step of a commit.

F7: the coordinator (the leader of ``__txn_journal-0``) is killed after BEGIN (the
transaction's records journaled at their partitions, no commit asked for yet), with its
PREPARE_COMMIT appended but not yet replicated (``coordinator.journal_appended``, armed
once the transaction's records are sent, so the next coordinator record is the
PREPARE), after the PREPARE is committed (``coordinator.after_prepare``), after the
first partition's APPLY of the fan-out (``coordinator.during_apply``), and after the
fan-out, before COMMITTED is journaled (``coordinator.after_apply``). The producer, on
the bootstrap list, follows the coordinator to its new broker; the new coordinator
replays the replicated journal and keeps the open transaction, or redoes the prepared
one, or (a PREPARE its replicas never got) lets the retried commit prepare afresh; the
commit (asked again after the kill) is answered as committed.
F8: the coordinator and a leader of one of the transaction's partitions are the same
broker, killed together after PREPARE_COMMIT: the new coordinator applies at that
partition's new leader, from the journal entries its followers replicated.

Each ends with every partition's replicas (and the journal partition's) byte-identical,
and every transaction read by a plain consumer exactly once and whole, in order."""

from __future__ import annotations

import pytest
from cluster_checks import check_replicas_agree, check_transactions
from cluster_faults import CRASH_POINTS, EXPIRY_S, FaultCluster
from cluster_workload import COMMITTED, TransactionalWriter

from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC

pytestmark = [pytest.mark.slow, pytest.mark.crash]

PARTITIONS = 3


def _layout(cluster: FaultCluster, topic: str) -> tuple[int, dict[int, int]]:
    """A new topic of PARTITIONS partitions; (the coordinator's broker, leader by partition)."""
    cluster.create_topic(topic, PARTITIONS)
    cluster.wait_in_sync(TXN_JOURNAL_TOPIC)
    coordinator = cluster.coordinator().leader
    leaders = {}
    for partition in range(PARTITIONS):
        state = cluster.state(topic, partition)
        assert state is not None
        leaders[partition] = state.leader
    return coordinator, leaders


def _kill_and_recover(
    cluster: FaultCluster, topic: str, coordinator: int, step: str, partitions: list[int], tag: str
) -> None:
    """Commit one transaction over ``partitions`` with the coordinator (on broker
    ``coordinator``) killed at ``step``; it must be answered committed; then one more, the
    broker back, and the checks."""
    killed = cluster.brokers[coordinator]
    with TransactionalWriter(cluster, topic, PARTITIONS, tag) as writer:
        assert writer.run_one().outcome == COMMITTED  # the producer knows the coordinator
        if step == "begin":
            txn = writer.run_one(writer.new_txn(partitions), before_commit=killed.kill)
        else:  # armed once the records are journaled: the commit's steps are next
            txn = writer.run_one(
                writer.new_txn(partitions), before_commit=lambda: killed.arm_crash(step)
            )
            killed.wait_exit(EXPIRY_S)
        assert txn.outcome == COMMITTED, txn.error
        assert not killed.alive
        moved = cluster.coordinator()
        assert moved.leader != coordinator
        assert writer.run_one().outcome == COMMITTED
        killed.disarm_crashes()
        cluster.restart(coordinator)
        assert writer.run_one().outcome == COMMITTED
    check_transactions(cluster, topic, PARTITIONS, [writer])
    check_replicas_agree(cluster, TXN_JOURNAL_TOPIC)


@pytest.mark.parametrize("step", ["begin", *CRASH_POINTS])
def test_f7_coordinator_killed_at_a_step_of_the_commit(
    cluster: FaultCluster, topic: str, step: str
) -> None:
    coordinator, leaders = _layout(cluster, topic)
    # Partitions led elsewhere: only the coordinator dies (F8 kills a leader with it).
    elsewhere = [p for p, leader in leaders.items() if leader != coordinator]
    assert elsewhere, leaders
    _kill_and_recover(cluster, topic, coordinator, step, elsewhere, f"f7{step[-5:]}")


def test_f8_coordinator_and_a_partition_leader_killed_together(
    cluster: FaultCluster, topic: str
) -> None:
    coordinator, leaders = _layout(cluster, topic)
    same = [p for p, leader in leaders.items() if leader == coordinator]
    elsewhere = [p for p, leader in leaders.items() if leader != coordinator]
    if not same:  # leaders follow the assignment; move the coordinator onto one
        pytest.skip(f"no partition led by the coordinator's broker {coordinator}: {leaders}")
    _kill_and_recover(
        cluster, topic, coordinator, "coordinator.after_prepare", same + elsewhere[:1], "f8"
    )
