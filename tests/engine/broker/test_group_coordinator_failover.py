"""Group coordinators on a replicated ``__consumer_offsets`` (CLUSTER.md §3.5), three cluster
brokers in one process: the group coordinator of a group is the leader of its offsets
partition; a commit there is answered once the replicas hold it, survives the partition's
leadership moving, and a transactional commit sent to the group coordinator joins a
transaction whose coordinator is another broker, with KIP-447's fence across brokers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import wait_for as wait_for_slowly
from log_support import read_all
from replication_support import BROKER_IDS, TOPIC, Cluster

from twinlog.engine.base.errors import (
    NotCoordinatorError,
    PendingTransactionError,
    ProducerFencedError,
    TwinlogError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata

GROUP = "billing"
CONSUMED = TopicPartition("payments", 3)  # the offsets are the group's of another topic


def wait_for(what: str, probe: Callable[[], object]) -> None:
    wait_for_slowly(what, probe, timeout_s=10.0, poll_s=0.005)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    opened.roles(leader=1, epoch=1)
    opened.start_pumping()
    opened.use_coordinator(1)  # every transaction's coordinator is broker 1
    yield opened
    opened.close()


def _offset(broker: Broker) -> int:
    return broker.fetch_offsets(GROUP, [CONSUMED])[CONSUMED]


def _offsets_log(cluster: Cluster, broker_id: int) -> bytes:
    broker = cluster.brokers[broker_id]
    return read_all(broker.partition(broker.group_offsets.partition_for(GROUP)).log)


def _transaction(cluster: Cluster, name: str) -> tuple[ProducerIdentity, int]:
    coordinator = cluster.brokers[1]
    identity = coordinator.init_producer(name)
    transaction_id = coordinator.begin_transaction(
        identity.producer_id, identity.producer_generation
    )
    return identity, transaction_id


def _send_offsets(at: Broker, identity: ProducerIdentity, transaction_id: int, offset: int) -> None:
    at.send_offsets_to_transaction(
        transaction_id,
        identity.producer_id,
        identity.producer_generation,
        GROUP,
        {CONSUMED: offset},
    )


def _commit(cluster: Cluster, identity: ProducerIdentity, transaction_id: int) -> None:
    cluster.brokers[1].commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )


def test_committed_offsets_follow_the_offsets_partition_leader(cluster: Cluster) -> None:
    leader = cluster.use_group_coordinator(GROUP, 2)
    leader.commit_offsets(GROUP, {CONSUMED: 5})
    # answered once every in-sync replica holds it (acks=all)
    assert {_offsets_log(cluster, b) for b in BROKER_IDS} == {_offsets_log(cluster, 2)}
    assert _offset(leader) == 5
    for other in (1, 3):  # they follow the partition: they are not its group coordinator
        with pytest.raises(NotCoordinatorError, match="group coordinator"):
            _offset(cluster.brokers[other])
        with pytest.raises(NotCoordinatorError):
            cluster.brokers[other].commit_offsets(GROUP, {CONSUMED: 6})

    successor = cluster.use_group_coordinator(GROUP, 3, epoch=2)
    assert _offset(successor) == 5  # folded from its replica of the partition
    with pytest.raises(NotCoordinatorError):
        _offset(leader)  # deposed: its view of the group is gone
    successor.commit_offsets(GROUP, {CONSUMED: 7})

    back = cluster.use_group_coordinator(GROUP, 2, epoch=3)
    assert _offset(back) == 7  # loaded again, with what was committed meanwhile


def test_a_transactional_offset_commit_at_the_group_coordinator_applies_with_the_transaction(
    cluster: Cluster,
) -> None:
    group_coordinator = cluster.use_group_coordinator(GROUP, 2)
    identity, transaction_id = _transaction(cluster, "etl")
    cluster.brokers[1].produce(
        TOPIC.topic,
        0,
        batch([b"out"], identity, sequence=0, transaction_id=transaction_id),
        transaction_id=transaction_id,
    )
    _send_offsets(group_coordinator, identity, transaction_id, 42)
    with pytest.raises(PendingTransactionError):
        _offset(group_coordinator)  # KIP-447: not a stale answer
    offsets_partition = group_coordinator.group_offsets.partition_for(GROUP)
    held = _held(cluster, transaction_id)
    assert held is not None and offsets_partition in held.partitions  # at broker 1's coordinator

    _commit(cluster, identity, transaction_id)
    assert _offset(group_coordinator) == 42
    assert cluster.values(cluster.brokers[1]) == [b"out"]


def test_pending_offsets_survive_the_group_coordinator_moving(cluster: Cluster) -> None:
    first = cluster.use_group_coordinator(GROUP, 2)
    first.commit_offsets(GROUP, {CONSUMED: 1})
    identity, transaction_id = _transaction(cluster, "etl")
    _send_offsets(first, identity, transaction_id, 9)

    second = cluster.use_group_coordinator(GROUP, 3, epoch=2)
    # restored from the partition's journal: still pending, never the old offset
    with pytest.raises(PendingTransactionError):
        _offset(second)
    with pytest.raises(PendingTransactionError):
        second.commit_offsets(GROUP, {CONSUMED: 2})  # a plain commit may not overtake it

    _commit(cluster, identity, transaction_id)  # applied at the new leader
    wait_for("the offset applied", lambda: _offset(second) == 9)


def test_an_aborted_transaction_releases_the_offsets_it_held(cluster: Cluster) -> None:
    group_coordinator = cluster.use_group_coordinator(GROUP, 3)
    group_coordinator.commit_offsets(GROUP, {CONSUMED: 4})
    identity, transaction_id = _transaction(cluster, "etl")
    _send_offsets(group_coordinator, identity, transaction_id, 8)
    cluster.brokers[1].abort_transaction(
        transaction_id, identity.producer_id, identity.producer_generation
    )
    wait_for("the abort applied", lambda: _pending_free(group_coordinator))
    assert _offset(group_coordinator) == 4


def _pending_free(broker: Broker) -> bool:
    try:
        _offset(broker)
    except PendingTransactionError:
        return False
    return True


def _held(cluster: Cluster, transaction_id: int) -> TransactionMetadata | None:
    """The transaction as its coordinator (broker 1's) knows it."""
    return cluster.brokers[1].coordinators[0].transaction(transaction_id)


def test_kip_447_fence_reaches_the_holders_coordinator_on_another_broker(
    cluster: Cluster,
) -> None:
    group_coordinator = cluster.use_group_coordinator(GROUP, 2)
    older, older_transaction = _transaction(cluster, "owner-before-rebalance")
    newer, newer_transaction = _transaction(cluster, "owner-after-rebalance")
    assert newer_transaction > older_transaction
    _send_offsets(group_coordinator, newer, newer_transaction, 11)

    # the older transaction may not take offsets a newer open one holds: it is the zombie
    with pytest.raises(ProducerFencedError, match="zombie"):
        _send_offsets(group_coordinator, older, older_transaction, 10)

    # a newest one takes them: the newer, still open, is aborted at its coordinator on
    # broker 1 (the group coordinator, broker 2, asked it there)
    newest, newest_transaction = _transaction(cluster, "owner-after-second-rebalance")
    _send_offsets(group_coordinator, newest, newest_transaction, 12)
    aborted = _held(cluster, newer_transaction)  # None: aborted, completed and forgotten
    assert aborted is None or aborted.state in (
        TransactionState.PREPARE_ABORT,
        TransactionState.ABORTED,
    )
    with pytest.raises(TwinlogError):  # its producer learns it at its commit
        _commit(cluster, newer, newer_transaction)

    _commit(cluster, newest, newest_transaction)
    assert _offset(group_coordinator) == 12
