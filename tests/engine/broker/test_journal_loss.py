"""A local data journal that lost a transaction's entries never turns into a shorter commit.

LMDB keeps no checksums: a damaged page can make a transaction's index row or
entries vanish without an error. A commit counts, for every partition a produce
added, the entries the journal holds, and writes the counts into PREPARE_COMMIT:

- entries gone before the commit: the commit is refused, nothing is decided,
  and the producer aborts and sends again;
- entries gone between the decision and the copy: APPLY_COMMIT refuses with
  CorruptJournalError and copies nothing; the transaction stays prepared until
  the journal is restored, or the operator accepts the loss
  (``accept_journal_loss``) and it completes as empty.

The loss is made with the journal's own purge (a real deletion of the row and
its entries in the LMDB file), which is what a damaged page looks like to the
copier: no record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_broker import Txn, read_all

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import TransactionDataMissingError
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.journal import LocalJournal
from twinlog.journal.local_tables import Tables

JOURNAL = "journal"


def _lose_journaled_entries(data_dir: Path, transaction_id: int) -> None:
    """With the broker closed: LMDB forgets the transaction (row and entries) behind the
    journal logs' back, its applied offsets unchanged (damage: nothing to replay)."""
    journal = LocalJournal.open(data_dir / JOURNAL)
    lost = 0
    try:
        with journal._env.begin(write=True, buffers=True) as txn:
            tables = Tables(txn, journal._databases)
            for name, row in list(tables.partitions()):
                record = tables.transaction(row.partition_id, name, transaction_id)
                if record is None:
                    continue
                for sequence in tables.walk(row.partition_id, record):
                    tables.delete_entry(row.partition_id, sequence)
                    lost += 1
                tables.delete_transaction(row.partition_id, transaction_id)
            tables.flush()
        assert lost > 0
    finally:
        journal.close()


def test_a_commit_of_a_transaction_whose_batches_were_lost_is_refused(tmp_path: Path) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", partitions=2)
        producer = Txn(broker, "app")
        producer.begin()
        producer.send("orders", 0, [b"a", b"b"])
        producer.send("orders", 1, [b"c"])
        lost = producer.transaction_id
    _lose_journaled_entries(tmp_path, lost)
    with Broker.open(tmp_path) as broker:
        producer.broker = broker
        with pytest.raises(TransactionDataMissingError, match="abort the transaction"):
            producer.commit()
        (still_open,) = broker.list_transactions()
        assert still_open.state is TransactionState.ONGOING  # nothing was decided
        producer.abort()
        producer.begin()
        producer.send("orders", 0, [b"again"])
        producer.commit()
        assert read_all(broker, "orders", 0) == [b"again"]
        assert read_all(broker, "orders", 1) == []


def test_a_decided_commit_whose_batches_were_lost_is_not_applied_empty(tmp_path: Path) -> None:
    # One coordinator: the stuck transaction must not hold up the others queued behind it.
    with Broker.open(tmp_path, journal_partitions=1) as broker:
        broker.create_topic("orders")
        producer = Txn(broker, "app")
        producer.begin()
        producer.send("orders", 0, [b"a", b"b"])
        decided = producer.transaction_id
        failpoints.arm("coordinator.after_prepare", "raise")
        try:
            with pytest.raises(failpoints.FailpointError):
                producer.commit()  # PREPARE_COMMIT is durable; the copy never started
        finally:
            failpoints.disarm_all()
    _lose_journaled_entries(tmp_path, decided)
    with Broker.open(tmp_path) as broker:
        coordinator = broker.coordinator_manager.for_id(decided)
        (prepared,) = broker.list_transactions()
        assert prepared.state is TransactionState.PREPARE_COMMIT
        txn = coordinator.transaction(decided)
        assert txn is not None and not coordinator.wait_complete(txn, 1.0)
        assert read_all(broker, "orders", 0) == []  # not "committed as nothing"
        other = Txn(broker, "other")
        other.begin()
        other.send("orders", 0, [b"other"])
        other.commit()  # waits until applied, behind the stuck one in the queue
        assert read_all(broker, "orders", 0) == [b"other"]
        (still,) = broker.list_transactions()
        assert still.transaction_id == decided
        assert (
            still.state is TransactionState.PREPARE_COMMIT
        )  # waits for the journal to be restored
    # No backup: the operator accepts the loss, and the decided commit completes as empty.
    with Broker.open(tmp_path, accept_journal_loss="true") as broker:
        txn = broker.coordinator_manager.for_id(decided).transaction(decided)
        assert txn is None or broker.coordinator_manager.for_id(decided).wait_complete(txn, 10.0)
        assert broker.list_transactions() == []
        assert read_all(broker, "orders", 0) == [b"other"]


def test_a_commit_naming_more_batches_than_a_journal_holds_is_refused(tmp_path: Path) -> None:
    """Partitions added explicitly (AddPartitionsToTransaction) are not known to hold data:
    only the producer's own count of written batches tells a lost one from none sent."""
    with Broker.open(tmp_path) as broker:
        broker.create_topic("orders", partitions=2)
        producer = Txn(broker, "app")
        producer.begin()
        identity = producer.identity
        broker.add_partitions_to_transaction(
            producer.transaction_id,
            identity.producer_id,
            identity.producer_generation,
            [TopicPartition("orders", 0), TopicPartition("orders", 1)],
        )
        producer.send("orders", 0, [b"a"])
        producer.send("orders", 0, [b"b"])
        producer.send("orders", 1, [b"c"])
        with pytest.raises(TransactionDataMissingError, match=r"orders-0'?\)?: 2 of 3"):
            broker.commit_transaction(
                producer.transaction_id,
                identity.producer_id,
                identity.producer_generation,
                batches_written={TopicPartition("orders", 0): 3, TopicPartition("orders", 1): 1},
            )
        (still_open,) = broker.list_transactions()
        assert still_open.state is TransactionState.ONGOING  # nothing was decided
        producer.abort()
        assert read_all(broker, "orders", 0) == [] and read_all(broker, "orders", 1) == []
