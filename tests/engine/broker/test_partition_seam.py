"""The coordinator <-> partition seam: epochs refused when stale, and the freeze at the count.

J3 (CLUSTER.md section 3.4): a send that passed its checks is either in the entry
count PREPARE_COMMIT records, or refused; none is acknowledged and left out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    DiskFullError,
    FencedLeaderEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
    UnknownLeaderEpochError,
)
from twinlog.engine.base.types import ProducerIdentity, TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    CountEntries,
    RegisterPartition,
    coordinator_partition_of,
)
from twinlog.journal.txn_records import PrepareCommit

TOPIC = "seam"
P0 = TopicPartition(TOPIC, 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    opened = Broker.open(tmp_path / "data", transaction_check_interval_ms=60_000)
    opened.create_topic(TOPIC, 4)
    yield opened
    opened.close()


def open_transaction(broker: Broker, name: str) -> tuple[ProducerIdentity, int]:
    identity = broker.init_producer(name)
    return identity, broker.begin_transaction(identity.producer_id, identity.producer_generation)


def values_in_log(broker: Broker, partition: int) -> list[bytes]:
    found: list[bytes] = []
    offset = 0
    while True:
        records = broker.fetch(TOPIC, partition, offset, max_bytes=1 << 30).records
        if not records:
            return found
        for item in iter_batches(records):
            found.extend(r.value or b"" for r in item.records())
            offset = item.header.next_offset


def test_a_stale_coordinator_epoch_is_refused_and_changes_nothing(broker: Broker) -> None:
    identity, transaction_id = open_transaction(broker, "epochs")
    broker.produce(TOPIC, 0, batch([b"kept"], identity, 0, transaction_id))
    leaders = broker.local_partition_leaders
    partition = broker.partition(TopicPartition(TOPIC, 0))
    owner = coordinator_partition_of(transaction_id)
    newer = CallEpochs(owner, 1, 0)
    assert leaders.count_entries(CountEntries(transaction_id, P0, newer)).entry_count == 1
    stale = CallEpochs(owner, 0, 0)
    with pytest.raises(TransactionCoordinatorFencedError) as raised:
        leaders.apply_abort(ApplyAbort(transaction_id, P0, stale))
    assert raised.value.fatal
    with pytest.raises(TransactionCoordinatorFencedError):
        leaders.apply_commit(ApplyCommit(transaction_id, P0, None, 1, stale))
    assert partition.journaled_entries(transaction_id) == 1  # neither dropped nor copied
    assert partition.log.log_end_offset == 0
    # Another coordinator partition's epochs are its own.
    other = CallEpochs(owner + 1, 0, 0)
    assert leaders.count_entries(CountEntries(transaction_id + 1, P0, other)).entry_count == 0
    # The broker's own coordinator (epoch 0) was replaced as far as the partition knows:
    # its commit is refused before anything is journaled, and the transaction stays open.
    with pytest.raises(TransactionCoordinatorFencedError):
        broker.commit_transaction(transaction_id, identity.producer_id, 0)
    assert broker.list_transactions()[0].state is TransactionState.ONGOING
    # The newer coordinator's APPLY goes through.
    leaders.apply_commit(ApplyCommit(transaction_id, P0, None, 1, newer))
    assert values_in_log(broker, 0) == [b"kept"]


def test_a_leader_epoch_older_or_newer_than_the_partitions_is_refused(broker: Broker) -> None:
    identity, transaction_id = open_transaction(broker, "leaders")
    broker.produce(TOPIC, 0, batch([b"v"], identity, 0, transaction_id))
    leaders = broker.local_partition_leaders
    partition = broker.partition(TopicPartition(TOPIC, 0))
    partition.epochs.become_leader(2)
    owner = coordinator_partition_of(transaction_id)
    with pytest.raises(FencedLeaderEpochError) as fenced:
        leaders.apply_commit(ApplyCommit(transaction_id, P0, None, 1, CallEpochs(owner, 0, 1)))
    assert fenced.value.retriable
    with pytest.raises(UnknownLeaderEpochError) as unknown:
        leaders.apply_abort(ApplyAbort(transaction_id, P0, CallEpochs(owner, 0, 3)))
    assert unknown.value.retriable
    with pytest.raises(FencedLeaderEpochError):
        leaders.count_entries(CountEntries(transaction_id, P0, CallEpochs(owner, 0, 1)))
    assert partition.journaled_entries(transaction_id) == 1
    assert partition.log.log_end_offset == 0
    # Sends are not frozen by a refused count: the transaction still takes batches.
    broker.produce(TOPIC, 0, batch([b"w"], identity, 1, transaction_id))
    assert partition.journaled_entries(transaction_id) == 2
    # The coordinator reads the partition's epoch (its metadata) and commits.
    broker.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    assert values_in_log(broker, 0) == [b"v", b"w"]


def test_register_partition_refuses_stale_epochs(broker: Broker) -> None:
    identity, transaction_id = open_transaction(broker, "register")
    coordinator = broker.coordinator_manager.for_id(transaction_id)
    owner = coordinator_partition_of(transaction_id)

    def register(epochs: CallEpochs) -> None:
        coordinator.register_partition(
            RegisterPartition(
                transaction_id, P0, identity.producer_id, identity.producer_generation, epochs
            )
        )

    with pytest.raises(TransactionCoordinatorFencedError):
        register(CallEpochs(owner, 1, 0))  # a coordinator epoch this coordinator is not at
    broker.partition(TopicPartition(TOPIC, 0)).epochs.become_leader(1)
    with pytest.raises(FencedLeaderEpochError):
        register(CallEpochs(owner, 0, 0))  # a deposed leader of the partition
    with pytest.raises(UnknownLeaderEpochError):
        register(CallEpochs(owner, 0, 2))
    assert broker.list_transactions()[0].partitions == ()  # nothing journaled
    register(CallEpochs(owner, 0, 1))
    assert broker.list_transactions()[0].partitions == (P0,)


def test_a_send_after_a_commit_is_decided_is_refused_abortable(broker: Broker) -> None:
    identity, transaction_id = open_transaction(broker, "decided")
    broker.produce(TOPIC, 0, batch([b"in"], identity, 0, transaction_id))
    broker.commit_transaction(transaction_id, identity.producer_id, identity.producer_generation)
    # Refused whether the copy is still to come (frozen, PREPARE_COMMIT) or done.
    with pytest.raises(InvalidTxnStateError) as raised:
        broker.produce(TOPIC, 0, batch([b"late"], identity, 1, transaction_id))
    assert raised.value.abortable
    txn = broker.coordinator_manager.for_id(transaction_id).transaction(transaction_id)
    assert txn is None or broker.coordinator_manager.for_id(transaction_id).wait_complete(txn, 10)
    assert values_in_log(broker, 0) == [b"in"]


def test_a_count_without_a_decision_does_not_shut_the_transaction(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The freeze lasts while the coordinator decides; a decision that failed (its journal
    write did) leaves the transaction open, and its next batch is taken and counted."""
    identity, transaction_id = open_transaction(broker, "undecided")
    broker.produce(TOPIC, 0, batch([b"first"], identity, 0, transaction_id))
    coordinator = broker.coordinator_manager.for_id(transaction_id)
    journal_write = coordinator.journal.write

    def full_disk(record: object) -> tuple[int, int]:
        if isinstance(record, PrepareCommit):
            raise DiskFullError("no space for PREPARE_COMMIT")
        return journal_write(record)  # type: ignore[arg-type]

    monkeypatch.setattr(coordinator.journal, "write", full_disk)
    with pytest.raises(DiskFullError):
        broker.commit_transaction(
            transaction_id, identity.producer_id, identity.producer_generation
        )
    monkeypatch.setattr(coordinator.journal, "write", journal_write)
    assert (
        broker.partition(TopicPartition(TOPIC, 0)).transaction_gate.open_count() == 1
    )  # frozen, kept
    broker.produce(TOPIC, 0, batch([b"second"], identity, 1, transaction_id))  # taken
    broker.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    assert values_in_log(broker, 0) == [b"first", b"second"]
    txn_journal = [r for _, r in coordinator.journal.replay(0) if isinstance(r, PrepareCommit)]
    assert txn_journal[-1].journaled == ((P0, 2),)


def test_an_aborted_transaction_leaves_no_gate_and_refuses_later_sends(broker: Broker) -> None:
    identity, transaction_id = open_transaction(broker, "aborted")
    broker.produce(TOPIC, 0, batch([b"gone"], identity, 0, transaction_id))
    broker.abort_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    partition = broker.partition(TopicPartition(TOPIC, 0))
    assert partition.transaction_gate.open_count() == 0  # nothing kept per transaction
    with pytest.raises(InvalidTxnStateError):
        broker.produce(TOPIC, 0, batch([b"late"], identity, 1, transaction_id))
    assert partition.transaction_gate.open_count() == 0  # a refused first batch leaves none
    assert partition.journaled_entries(transaction_id) == 0


ROUNDS = 4
PARTITIONS = 4
SENDS_MAX = 200


def send_until_refused(
    broker: Broker,
    identity: ProducerIdentity,
    transaction_id: int,
    partition: int,
    round_index: int,
    acknowledged: dict[int, list[bytes]],
    refused: dict[int, BaseException],
) -> None:
    """Send batches of one record to ``partition`` until the transaction refuses one."""
    for sequence in range(SENDS_MAX):
        value = f"r{round_index}-p{partition}-{sequence}".encode()
        try:
            broker.produce(TOPIC, partition, batch([value], identity, sequence, transaction_id))
        except InvalidTxnStateError as error:
            refused[partition] = error
            return
        acknowledged[partition].append(value)


def test_every_acknowledged_send_racing_a_commit_is_counted_and_copied(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Senders on every partition race the commit; a slow journal widens the window
    between a send's checks and its journal append."""
    real_append = broker.journal.append

    def slow_append(*args: object, **kwargs: object) -> object:
        time.sleep(0.001)
        return real_append(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(broker.journal, "append", slow_append)
    identity = broker.init_producer("racer")
    for round_index in range(ROUNDS):
        transaction_id = broker.begin_transaction(
            identity.producer_id, identity.producer_generation
        )
        acknowledged: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        refused: dict[int, BaseException] = {}

        senders = [
            threading.Thread(
                target=send_until_refused,
                args=(broker, identity, transaction_id, p, round_index, acknowledged, refused),
                daemon=True,
            )
            for p in range(PARTITIONS)
        ]
        for sender in senders:
            sender.start()
        time.sleep(0.02 + 0.01 * round_index)
        txn = broker.coordinator_manager.for_id(transaction_id).transaction(transaction_id)
        assert txn is not None
        broker.commit_transaction(
            transaction_id,
            identity.producer_id,
            identity.producer_generation,
            wait_for_applied=True,
        )
        for sender in senders:
            sender.join(timeout=10)
            assert not sender.is_alive()
        counted = dict(txn.journaled)
        for partition in range(PARTITIONS):
            copied = [
                v for v in values_in_log(broker, partition) if v.startswith(b"r%d-" % round_index)
            ]
            # Every acknowledged send is copied, nothing else is, and the count is exact.
            assert copied == acknowledged[partition], (round_index, partition)
            assert counted.get(TopicPartition(TOPIC, partition), 0) == len(copied)
        assert len(refused) == PARTITIONS  # each sender ran into the freeze, not SENDS_MAX


def test_a_promotion_is_stamped_into_the_next_batches_and_checked_by_the_seam(
    broker: Broker,
) -> None:
    """One home for the leader epoch: the data log stamps it into what it appends from the
    promotion on and records where it starts; the seam checks calls against the same value."""
    identity, transaction_id = open_transaction(broker, "stamped")
    broker.produce(TOPIC, 0, batch([b"before"]))
    partition = broker.partition(TopicPartition(TOPIC, 0))
    partition.epochs.become_leader(5)
    assert partition.log.leader_epoch == 5
    broker.produce(TOPIC, 0, batch([b"plain"]))
    broker.produce(TOPIC, 0, batch([b"copied"], identity, 0, transaction_id))
    broker.commit_transaction(
        transaction_id, identity.producer_id, identity.producer_generation, wait_for_applied=True
    )
    records = broker.fetch(TOPIC, 0, 0, max_bytes=1 << 20).records
    epochs = [header.partition_leader_epoch for header in (b.header for b in iter_batches(records))]
    assert epochs == [0, 5, 5]
    end = partition.log.epochs.end_offset_for_epoch(0, partition.log.log_end_offset)
    assert (end.epoch, end.end_offset) == (0, 1)
    with pytest.raises(FencedLeaderEpochError):
        partition.epochs.check_leader_epoch(0)
    with pytest.raises(ValueError):
        partition.epochs.become_leader(4)
