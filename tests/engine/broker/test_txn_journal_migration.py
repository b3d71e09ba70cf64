"""A single-node data directory of before one node was a cluster of one: its transaction
journals in ``txn/N`` move into ``__txn_journal`` once, at open; what cannot be moved is
refused with why, changing nothing."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from broker_support import batch
from metadata_fakes import InMemoryMetadataStore

from twinlog.engine.base.errors import DataDirFormatError
from twinlog.engine.base.types import TransactionState
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.broker.topic_registry import TopicRegistry
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client import Producer

CONFIG = {"journal_partitions": 2, "checkpoint_interval_ms": 3_600_000}
MOVED = "transaction journal partition(s) from txn/N"  # the migration's log line


def values(broker: Broker) -> list[bytes | None]:
    fetched = broker.fetch("t", 0, 0, max_bytes=1 << 20)
    return [record.value for b in iter_batches(fetched.records) for record in b.records()]


def write_old_layout(data_dir: Path) -> int:
    """A data directory as a single node of the previous version left it: committed
    transactions, one still open, the journals in ``txn/N`` and no ``__txn_journal`` in
    ``meta``. Written by this version, then put back into the old layout (the journal
    bytes are the same in both). The open transaction's id."""
    broker = Broker.open(data_dir, **CONFIG)
    broker.create_topic("t", 1)
    with Producer(broker, transactional_id="committed") as producer:
        producer.init_transactions()
        for value in (b"a", b"b"):
            with producer.transaction():
                producer.send("t", value, partition=0)
        producer.flush()
    identity = broker.init_producer("left-open")
    open_id = broker.begin_transaction(identity.producer_id, identity.producer_generation)
    broker.produce("t", 0, batch([b"open"], identity, 0, open_id))
    broker.close()
    (data_dir / "txn").mkdir()
    for index in range(CONFIG["journal_partitions"]):
        moved = data_dir / "logs" / f"{TXN_JOURNAL_TOPIC}-{index}"
        shutil.rmtree(moved / "journal")  # the old journals had no journal log of their own
        moved.rename(data_dir / "txn" / str(index))
    TopicRegistry(data_dir / "meta", CONFIG["journal_partitions"]).remove(TXN_JOURNAL_TOPIC)
    return open_id


def test_old_journals_move_once_and_every_transaction_survives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    open_id = write_old_layout(data_dir)
    with caplog.at_level(logging.WARNING), Broker.open(data_dir, **CONFIG) as broker:
        assert not (data_dir / "txn").exists()
        assert (data_dir / "logs" / f"{TXN_JOURNAL_TOPIC}-1" / "checkpoint").parent.is_dir()
        assert values(broker) == [b"a", b"b"]
        (in_flight,) = broker.list_transactions()  # replayed from the moved journal
        assert in_flight.transaction_id == open_id
        assert in_flight.state is TransactionState.ONGOING
        assert len(broker.coordinators) == CONFIG["journal_partitions"]
    moved = [r.getMessage() for r in caplog.records if MOVED in r.getMessage()]
    assert len(moved) == 1 and "moved 2 transaction journal partition(s)" in moved[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING), Broker.open(data_dir, **CONFIG) as broker:
        assert values(broker) == [b"a", b"b"]
        assert [t.transaction_id for t in broker.list_transactions()] == [open_id]
    assert not any(MOVED in r.getMessage() for r in caplog.records)


def test_a_move_cut_short_by_a_crash_is_finished_by_the_next_open(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    open_id = write_old_layout(data_dir)
    # the crash came after the first rename, before the second and the topic
    (data_dir / "txn" / "0").rename(data_dir / "logs" / f"{TXN_JOURNAL_TOPIC}-0")
    with Broker.open(data_dir, **CONFIG) as broker:
        assert values(broker) == [b"a", b"b"]
        assert [t.transaction_id for t in broker.list_transactions()] == [open_id]


def test_a_journal_in_both_places_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_old_layout(data_dir)
    both = data_dir / "logs" / f"{TXN_JOURNAL_TOPIC}-1"
    shutil.copytree(data_dir / "txn" / "1", both)
    with pytest.raises(DataDirFormatError, match="both exist and hold files"):
        Broker.open(data_dir, **CONFIG)
    assert sorted(p.name for p in (data_dir / "txn").iterdir()) == ["0", "1"]
    assert not (data_dir / "logs" / f"{TXN_JOURNAL_TOPIC}-0").exists()


def test_a_stray_entry_in_txn_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_old_layout(data_dir)
    (data_dir / "txn" / "7").mkdir()  # journal_partitions is 2
    with pytest.raises(DataDirFormatError, match="is not one of its 2 journal partitions"):
        Broker.open(data_dir, **CONFIG)
    assert (data_dir / "txn" / "0").is_dir()


def test_a_single_nodes_journals_cannot_join_a_cluster(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_old_layout(data_dir)
    with pytest.raises(DataDirFormatError, match="cannot join a cluster"):
        Broker.open(data_dir, metadata=InMemoryMetadataStore(), broker_id=1, **CONFIG)
    assert (data_dir / "txn" / "0").is_dir()
