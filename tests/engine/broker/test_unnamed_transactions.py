"""Requests that name no transaction (Kafka's protocol) get their transaction from the engine:
an implicit begin, the open transaction of a transactional batch (asked of the coordinator
only for its first batch on a partition), Kafka's per-epoch sequences, and EndTxn's
"latest" transaction, with its retries answered as the first end was."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    DuplicateSequenceError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
)
from twinlog.engine.base.types import ProduceResult, ProducerIdentity, TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.partition_calls import IssuedProducer, LookupProducer

TOPIC = "orders"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker.open(tmp_path / "data") as opened:
        opened.create_topic(TOPIC, partitions=2)
        yield opened


def ids(identity: ProducerIdentity) -> tuple[int, int]:
    return identity.producer_id, identity.producer_generation


def kafka_batch(identity: ProducerIdentity, sequence: int, *values: bytes) -> bytes:
    """A Kafka producer's transactional batch: the transactional bit, no transaction id."""
    return batch(list(values), identity, sequence=sequence, transaction_id=0)


def send(
    broker: Broker, identity: ProducerIdentity, partition: int, sequence: int, *values: bytes
) -> ProduceResult:
    return broker.produce(TOPIC, partition, kafka_batch(identity, sequence, *values))


def committed_values(broker: Broker, partition: int) -> list[bytes | None]:
    result = broker.fetch(TOPIC, partition, 0, max_bytes=1 << 30)
    return [r.value for b in iter_batches(result.records) for r in b.records()]


def commit(broker: Broker, identity: ProducerIdentity) -> int:
    latest = broker.latest_transaction(*ids(identity))
    assert latest is not None
    broker.commit_transaction(latest, *ids(identity), wait_for_applied=True)
    return latest


class CountingLookups:
    """The broker's seam, counting the lookups of a producer's open transaction."""

    def __init__(self, broker: Broker) -> None:
        self.inner = broker.transaction_coordinators
        self.lookups = 0

    def lookup_producer(self, request: LookupProducer) -> IssuedProducer:
        self.lookups += 1
        return self.inner.lookup_producer(request)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_the_implicit_begin_gives_one_transaction_until_it_ends(broker: Broker) -> None:
    identity = broker.init_producer("app")
    first = broker.open_transaction(*ids(identity))
    assert broker.open_transaction(*ids(identity)) == first  # a second AddPartitionsToTxn
    send(broker, identity, 0, 0, b"a")
    assert commit(broker, identity) == first
    second = broker.open_transaction(*ids(identity))
    assert second != first
    assert broker.latest_transaction(*ids(identity)) == second


def test_a_batch_joins_its_producers_open_transaction_and_commits_with_it(
    broker: Broker,
) -> None:
    identity = broker.init_producer("app")
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"a")
    send(broker, identity, 1, 0, b"b")
    assert committed_values(broker, 0) == []  # nothing readable before the commit
    commit(broker, identity)
    assert committed_values(broker, 0) == [b"a"] and committed_values(broker, 1) == [b"b"]


def test_a_batch_without_an_open_transaction_is_refused(broker: Broker) -> None:
    identity = broker.init_producer("app")
    with pytest.raises(InvalidTxnStateError, match="no open transaction"):
        send(broker, identity, 0, 0, b"early")
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"a")
    commit(broker, identity)
    # A late batch of the ended transaction: the gate's entry is gone, and so is the
    # producer's open transaction at its coordinator.
    with pytest.raises(InvalidTxnStateError, match="no open transaction"):
        send(broker, identity, 0, 1, b"late")
    assert committed_values(broker, 0) == [b"a"]


def test_only_a_transactions_first_batch_on_a_partition_asks_the_coordinator(
    broker: Broker,
) -> None:
    counting = CountingLookups(broker)
    broker.transaction_coordinators = counting  # type: ignore[assignment]
    identity = broker.init_producer("app")
    broker.open_transaction(*ids(identity))
    for sequence in range(5):
        send(broker, identity, 0, sequence, b"x")
    assert counting.lookups == 1
    send(broker, identity, 1, 0, b"y")
    assert counting.lookups == 2
    commit(broker, identity)
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 5, b"next")  # the next transaction asks again
    assert counting.lookups == 3


def test_an_aborted_transactions_partition_does_not_take_the_next_transactions_batch(
    broker: Broker,
) -> None:
    """EndTxn(abort) freezes the transaction on its partitions before it answers: the next
    transaction's first batch there is never taken for the aborted one."""
    identity = broker.init_producer("app")
    aborted = broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"dropped")
    broker.abort_transaction(aborted, *ids(identity))  # answered at PREPARE_ABORT
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 1, b"kept")
    commit(broker, identity)
    assert committed_values(broker, 0) == [b"kept"]


def test_kafka_sequences_run_on_across_transactions_and_retries_are_duplicates(
    broker: Broker,
) -> None:
    identity = broker.init_producer("app")
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"a")
    send(broker, identity, 0, 1, b"b")
    commit(broker, identity)
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 2, b"c")  # the epoch's numbering goes on
    assert send(broker, identity, 0, 2, b"c").duplicate  # a retry of it
    with pytest.raises(OutOfOrderSequenceError):
        send(broker, identity, 0, 4, b"gap")  # 3 never arrived
    send(broker, identity, 0, 3, b"d")
    with pytest.raises(DuplicateSequenceError):
        send(broker, identity, 0, 2, b"other", b"count")  # an older sequence with another count
    commit(broker, identity)
    assert committed_values(broker, 0) == [b"a", b"b", b"c", b"d"]


def test_a_transactions_first_batch_on_a_partition_follows_the_epochs_last(
    broker: Broker,
) -> None:
    """A Kafka producer pipelines its batches: when the first batch of a transaction on a
    partition fails (a retriable error) and the next one goes through, the next must be
    refused as a gap, or the retried first would look like an old duplicate and be
    dropped while the producer counts it written."""
    identity = broker.init_producer("app")
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"a", b"b")
    commit(broker, identity)
    broker.open_transaction(*ids(identity))
    with pytest.raises(
        OutOfOrderSequenceError, match=r"it starts at 0 or 2 there, so batches 2\.\.2 never arrived"
    ):
        send(broker, identity, 0, 3, b"d")  # 2 failed on its way
    send(broker, identity, 0, 2, b"c")  # its retry
    send(broker, identity, 0, 3, b"d")
    commit(broker, identity)
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"e")  # a producer that numbers from 0 again is taken
    commit(broker, identity)
    assert committed_values(broker, 0) == [b"a", b"b", b"c", b"d", b"e"]
    # Another partition, and a new generation, start from what they know: nothing yet.
    renewed = broker.init_producer("app")
    broker.open_transaction(*ids(renewed))
    send(broker, renewed, 1, 7, b"f")
    send(broker, renewed, 0, 9, b"g")
    commit(broker, renewed)
    assert committed_values(broker, 1) == [b"f"]


def test_a_retry_after_a_restart_is_still_a_duplicate(tmp_path: Path) -> None:
    """The journal keeps the producer's own sequences, so the transaction's table rebuilt
    from it after a restart recognises a retry."""
    with Broker.open(tmp_path / "data") as first:
        first.create_topic(TOPIC, partitions=1)
        identity = first.init_producer("app")
        first.open_transaction(*ids(identity))
        send(first, identity, 0, 40, b"a")
        send(first, identity, 0, 41, b"b", b"c")
    with Broker.open(tmp_path / "data") as second:
        assert send(second, identity, 0, 41, b"b", b"c").duplicate
        send(second, identity, 0, 43, b"d")
        commit(second, identity)
        assert committed_values(second, 0) == [b"a", b"b", b"c", b"d"]


def test_end_txn_finds_the_latest_transaction_and_a_retry_is_answered_alike(
    broker: Broker,
) -> None:
    identity = broker.init_producer("app")
    assert broker.latest_transaction(*ids(identity)) is None  # never begun
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"a")
    transaction_id = commit(broker, identity)
    assert broker.latest_transaction(*ids(identity)) == transaction_id
    broker.commit_transaction(transaction_id, *ids(identity))  # the retried EndTxn: no-op
    with pytest.raises(InvalidTxnStateError):
        broker.abort_transaction(transaction_id, *ids(identity))  # contrary to what happened
    assert committed_values(broker, 0) == [b"a"]


def test_a_new_generation_has_ended_nothing_and_fences_the_old(broker: Broker) -> None:
    old = broker.init_producer("app")
    broker.open_transaction(*ids(old))
    send(broker, old, 0, 0, b"a")
    commit(broker, old)
    new = broker.init_producer("app")
    assert broker.latest_transaction(*ids(new)) is None  # EndTxn(commit) now: INVALID_TXN_STATE
    with pytest.raises(ProducerFencedError):
        broker.latest_transaction(*ids(old))
    with pytest.raises(ProducerFencedError):
        broker.open_transaction(*ids(old))
    broker.open_transaction(*ids(new))
    with pytest.raises((ProducerFencedError, InvalidTxnStateError)):
        send(broker, old, 0, 1, b"zombie")
    assert broker.partition(TopicPartition(TOPIC, 0)).transaction_gate.open_count() == 0


def test_a_first_sequence_remembered_at_an_older_leader_epoch_is_not_trusted(
    broker: Broker,
) -> None:
    """Another leader may have taken the producer's later batches while this replica
    did not lead: at a new leader epoch the first batch takes any sequence again."""
    identity = broker.init_producer("app")
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 0, b"a")
    commit(broker, identity)
    partition = broker.partition(TopicPartition(TOPIC, 0))
    partition.role = dataclasses.replace(
        partition.role, leader_epoch=partition.role.leader_epoch + 1
    )
    broker.open_transaction(*ids(identity))
    send(broker, identity, 0, 5, b"f")  # 1..4 went to the leader in between
    commit(broker, identity)
    assert committed_values(broker, 0) == [b"a", b"f"]
