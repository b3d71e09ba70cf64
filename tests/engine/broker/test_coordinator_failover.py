"""Coordinator failover on a replicated transaction journal (CLUSTER.md §3.5), three cluster
brokers in one process: coordinator N is the leader of ``__txn_journal-N``; when another
broker takes that leadership it passes the barrier, replays the journal its replicas hold,
keeps ONGOING transactions open, redoes PREPARE_COMMIT, and the producer's retried commit
gets the true outcome. The deposed broker answers NotCoordinatorError."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_support import batch
from cluster_support import wait_for as wait_for_slowly
from log_support import read_all
from metadata_fakes import InMemoryIdSource, InMemoryMetadataStore
from replication_support import TOPIC, TXN_JOURNAL, Cluster

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import NotCoordinatorError
from twinlog.engine.base.types import ProducerIdentity
from twinlog.engine.broker.broker import Broker
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer

IN_PROCESS_POLL_S = 0.005


def wait_for(what: str, probe: Callable[[], object]) -> None:
    wait_for_slowly(what, probe, timeout_s=10.0, poll_s=IN_PROCESS_POLL_S)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path, replica_ack_timeout_ms=2000, replica_lag_time_max_ms=60_000)
    opened.roles(leader=1, epoch=1)
    opened.start_pumping()
    yield opened
    failpoints.disarm_all()
    opened.close()


def _open_transaction(coordinator: Broker, leader: Broker) -> tuple[ProducerIdentity, int]:
    identity = coordinator.init_producer("payments")
    transaction_id = coordinator.begin_transaction(
        identity.producer_id, identity.producer_generation
    )
    for sequence, value in enumerate([b"a", b"b"]):
        leader.produce(
            TOPIC.topic,
            0,
            batch([value], identity, sequence=sequence, transaction_id=transaction_id),
            transaction_id=transaction_id,
        )
    return identity, transaction_id


def test_an_open_transaction_survives_the_coordinator_moving(cluster: Cluster) -> None:
    old = cluster.use_coordinator(2)
    identity, transaction_id = _open_transaction(old, cluster.brokers[1])
    new = cluster.use_coordinator(3, epoch=2)
    # the deposed broker refuses; the new one knows the transaction from the journal
    with pytest.raises(NotCoordinatorError):
        old.commit_transaction(transaction_id, identity.producer_id, identity.producer_generation)
    assert [t.transaction_id for t in new.list_transactions()] == [transaction_id]
    new.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    assert cluster.values(cluster.brokers[1]) == [b"a", b"b"]
    # every replica of the journal partition holds the same records
    journals = {read_all(cluster.brokers[b].partition(TXN_JOURNAL).log) for b in (1, 2, 3)}
    wait_for(
        "the journal replicas to agree",
        lambda: (
            len({read_all(cluster.brokers[b].partition(TXN_JOURNAL).log) for b in (1, 2, 3)}) == 1
        ),
    )
    assert journals  # read at least once


def test_a_prepared_commit_is_redone_by_the_new_coordinator(cluster: Cluster) -> None:
    old = cluster.use_coordinator(2)
    identity, transaction_id = _open_transaction(old, cluster.brokers[1])
    # The old coordinator applies, then fails before COMMITTED, again and again.
    failpoints.arm("coordinator.after_apply", times=1_000_000)
    old.commit_transaction(transaction_id, identity.producer_id, identity.producer_generation)
    wait_for("the old coordinator's apply", lambda: failpoints.hits("coordinator.after_apply"))
    new = cluster.use_coordinator(3, epoch=2)  # the old one is unloaded first
    failpoints.disarm_all()
    wait_for("the new coordinator to finish the commit", lambda: not new.list_transactions())
    assert cluster.values(cluster.brokers[1]) == [b"a", b"b"]  # applied twice, copied once
    # the producer's retried commit (it never saw an answer) gets the true outcome
    new.commit_transaction(transaction_id, identity.producer_id, identity.producer_generation)


def test_a_fenced_producer_stays_fenced_after_failover(cluster: Cluster) -> None:
    old = cluster.use_coordinator(2)
    first = old.init_producer("payments")
    second = old.init_producer("payments")
    assert second.producer_generation > first.producer_generation
    new = cluster.use_coordinator(3, epoch=2)
    from twinlog.engine.base.errors import ProducerFencedError

    with pytest.raises(ProducerFencedError):
        new.begin_transaction(first.producer_id, first.producer_generation)
    new.begin_transaction(second.producer_id, second.producer_generation)


def test_a_cluster_broker_purges_below_the_smallest_published_watermark(tmp_path: Path) -> None:
    """A cluster broker's low watermark is the coordinators' published word only: 0 while
    any journal partition has published none, then the smallest mark."""
    store = InMemoryMetadataStore(journal_partitions=3)
    with Broker.open(tmp_path, metadata=store, ids=InMemoryIdSource(), broker_id=1) as broker:
        assert broker.low_watermark() == 0  # nothing published
        store.checkpoint_pointers(0).write(CheckpointPointer(1, 0, low_watermark=5000))
        store.checkpoint_pointers(1).write(CheckpointPointer(1, 0, low_watermark=900))
        assert broker.low_watermark() == 0  # partition 2 has published nothing yet
        store.checkpoint_pointers(2).write(CheckpointPointer(1, 0, low_watermark=None))
        assert broker.low_watermark() == 0  # a pointer without a mark counts as none
        store.checkpoint_pointers(2).write(CheckpointPointer(1, 0, low_watermark=7000))
        assert broker.low_watermark() == 900
