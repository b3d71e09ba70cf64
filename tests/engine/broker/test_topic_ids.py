"""Topic ids (Kafka's KIP-516): a topic is its id, not only its name.

An open transaction's batches for a topic wait in the local data journal under
the partition's name. If the topic is deleted and one of the same name
created, they must never be applied to the new one: deleting a topic aborts
the open transactions that touch it (as Kafka does), and the topic registry
gives every topic a random 16-byte id, kept across restarts and shown by
``describe_topic``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import (
    InvalidTxnStateError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_format import read_header
from twinlog.engine.records.batch_reader import iter_batches

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}


def _values(broker: Broker, topic: str) -> list[bytes | None]:
    fetched = broker.fetch(topic, 0, 0, max_bytes=1 << 20)
    return [record.value for b in iter_batches(fetched.records) for record in b.records()]


def test_a_deleted_topics_open_transaction_never_lands_in_its_namesake(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t")
        broker.create_topic("other")
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        broker.produce(
            "t",
            0,
            batch([b"old-topic"], producer, 0, transaction_id),
            transaction_id=transaction_id,
        )
        broker.produce(
            "other",
            0,
            batch([b"other-topic"], producer, 0, transaction_id),
            transaction_id=transaction_id,
        )
        broker.delete_topic("t")
        broker.create_topic("t")
        with pytest.raises(InvalidTxnStateError):  # deleting "t" aborted it
            broker.commit_transaction(
                transaction_id,
                producer.producer_id,
                producer.producer_generation,
                wait_for_applied=True,
            )
        assert _values(broker, "t") == []
        assert _values(broker, "other") == []  # aborted whole, not half committed
        assert broker.list_transactions() == []
        # The producer goes on with a new transaction.
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        broker.produce(
            "t",
            0,
            batch([b"new-topic"], producer, 0, transaction_id),
            transaction_id=transaction_id,
        )
        broker.commit_transaction(
            transaction_id, producer.producer_id, producer.producer_generation, True
        )
        assert _values(broker, "t") == [b"new-topic"]


def test_topics_have_ids_kept_across_restarts(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    with Broker.open(directory, **CONFIG) as broker:
        first = broker.create_topic("t").topic_id
        assert uuid.UUID(first).hex == first
        assert broker.describe_topic("t").topic_id == first
    with Broker.open(directory, **CONFIG) as broker:
        assert broker.describe_topic("t").topic_id == first
        broker.delete_topic("t")
        assert broker.create_topic("t").topic_id != first
        with pytest.raises(UnknownTopicOrPartitionError):
            broker.delete_topic("gone")


def test_a_data_directory_without_topic_ids_gets_them_on_first_open(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    with Broker.open(directory, **CONFIG) as broker:
        broker.create_topic("t", partitions=2)
        broker.produce("t", 1, batch([b"kept"]))
    meta = directory / "meta"
    document = json.loads(read_checked(meta))
    old = {  # what version 1 wrote: no ids
        "version": 1,
        "journal_partitions": document["journal_partitions"],
        "topics": {
            name: {"partitions": topic["partitions"], "config": topic["config"]}
            for name, topic in document["topics"].items()
        },
    }
    replace_file(meta, with_checksum(json.dumps(old).encode()))
    with Broker.open(directory, **CONFIG) as broker:
        given = broker.describe_topic("t").topic_id
        assert len(bytes.fromhex(given)) == 16
        fetched = broker.fetch("t", 1, 0, max_bytes=1 << 20)
        assert [r.value for b in iter_batches(fetched.records) for r in b.records()] == [b"kept"]
    with Broker.open(directory, **CONFIG) as broker:
        assert broker.describe_topic("t").topic_id == given


def test_a_send_racing_a_delete_is_refused_not_journaled(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t")
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        old_partition = broker.partition(
            TopicPartition("t", 0)
        )  # as a send holds it while the delete runs
        broker.delete_topic("t")
        broker.create_topic("t")
        sent = batch([b"late"], producer, 0, transaction_id)
        with pytest.raises(UnknownTopicOrPartitionError):
            old_partition.append_transactional(transaction_id, sent, read_header(sent))
        assert broker.journal.transaction("t-0", transaction_id) is None


def test_a_new_topic_never_opens_files_a_deleted_namesake_left(tmp_path: Path) -> None:
    # A crash between writing meta without the topic and removing its directories
    # leaves them behind; a topic created later under that name is another topic.
    directory = tmp_path / "data"
    with Broker.open(directory, **CONFIG) as broker:
        broker.create_topic("t")
        broker.produce("t", 0, batch([b"deleted-topic"]))
    meta = directory / "meta"
    document = json.loads(read_checked(meta))
    del document["topics"]["t"]
    replace_file(meta, with_checksum(json.dumps(document).encode()))
    assert (directory / "logs" / "t-0").exists()
    with Broker.open(directory, **CONFIG) as broker:
        broker.create_topic("t")
        assert _values(broker, "t") == []
        assert broker.list_offset("t", 0, "latest") == 0


def test_a_decided_copy_that_does_not_finish_refuses_the_deletion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from twinlog.engine.base import failpoints
    from twinlog.engine.base.errors import ConcurrentTransactionsError
    from twinlog.engine.broker import topic_deletion

    monkeypatch.setattr(topic_deletion, "DECIDED_WAIT_S", 0.2)
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t")
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        broker.produce(
            "t", 0, batch([b"decided"], producer, 0, transaction_id), transaction_id=transaction_id
        )
        failpoints.arm("journal.before_sync", "enospc", times=1_000_000)  # a full disk
        try:
            broker.commit_transaction(
                transaction_id, producer.producer_id, producer.producer_generation
            )
            with pytest.raises(ConcurrentTransactionsError, match="retry the deletion"):
                broker.delete_topic("t")
            assert "t" in broker.list_topics()
            # The refusal reopened the gate: the topic takes transactional sends again.
            other = broker.init_producer("other")
            second = broker.begin_transaction(other.producer_id, other.producer_generation)
            failpoints.disarm_all()
            broker.produce("t", 0, batch([b"later"], other, 0, second), transaction_id=second)
        finally:
            failpoints.disarm_all()
        txn = broker.coordinator_manager.for_id(transaction_id).transaction(transaction_id)
        if txn is not None:
            assert broker.coordinator_manager.for_id(transaction_id).wait_complete(txn, 10.0)
        broker.delete_topic("t")  # aborts the open one, the decided one is done
        assert "t" not in broker.list_topics()
