"""MetadataStore and IdSource: the local versions over today's files, and the broker and the
coordinator running on in-memory ones (what a ZooKeeper version will be) with no local
meta, ids or checkpoint pointer file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from broker_support import batch
from coordinator_support import RecordingApplier
from metadata_fakes import InMemoryIdSource, InMemoryMetadataStore, InMemoryPointer

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import ProducerFencedError, TopicExistsError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.local_metadata_store import LocalMetadataStore
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.topic_registry import TopicRegistry
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.coordinator import PARTITION_BITS, Coordinator
from twinlog.engine.transactions.id_allocator import LocalIdSource
from twinlog.engine.transactions.id_source import IdSource
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer
from twinlog.journal.txn_journal import TxnJournal

CONFIG = {"journal_partitions": 1, "checkpoint_interval_ms": 3_600_000}


def values(broker: Broker, topic: str) -> list[bytes | None]:
    fetched = broker.fetch(topic, 0, 0, max_bytes=1 << 20)
    return [record.value for b in iter_batches(fetched.records) for record in b.records()]


def test_the_broker_runs_on_in_memory_metadata_and_ids(tmp_path: Path) -> None:
    metadata: MetadataStore = InMemoryMetadataStore()
    ids = InMemoryIdSource()
    data_dir = tmp_path / "data"
    with Broker.open(data_dir, metadata=metadata, ids=ids, **CONFIG) as broker:
        broker.create_topic("t")
        broker.produce("t", 0, batch([b"plain"]))
        identity = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            identity.producer_id, identity.producer_generation
        )
        broker.produce("t", 0, batch([b"txn"], identity, 0, transaction_id))
        broker.commit_transaction(
            transaction_id,
            identity.producer_id,
            identity.producer_generation,
            wait_for_applied=True,
        )
        checkpoint = broker.coordinators[0].checkpoint()
    assert identity.producer_id >> PARTITION_BITS == 1  # the fake's first producer id
    assert ids.blocks_taken == 2  # one block per kind
    assert set(metadata.topics()) == {"t", "__consumer_offsets", "__txn_journal"}
    pointer = metadata.checkpoint_pointers(0).read()
    assert pointer is not None and pointer.low_watermark is not None  # published with it
    assert pointer == CheckpointPointer(
        checkpoint.checkpoint_offset, checkpoint.replay_from_offset, pointer.low_watermark
    )
    for local_file in ("meta", "ids", "logs/__txn_journal-0/checkpoint"):
        assert not (data_dir / local_file).exists(), local_file

    restarted_ids = ids.restart()
    with Broker.open(data_dir, metadata=metadata, ids=restarted_ids, **CONFIG) as broker:
        assert broker.list_topics() == ["t"]
        assert values(broker, "t") == [b"plain", b"txn"]
        again = broker.init_producer("app")
        assert again.producer_id == identity.producer_id
        assert again.producer_generation == identity.producer_generation + 1  # from the table
        with pytest.raises(ProducerFencedError):
            broker.begin_transaction(identity.producer_id, identity.producer_generation)
        next_transaction = broker.begin_transaction(again.producer_id, again.producer_generation)
        assert next_transaction > transaction_id  # the restart took a fresh, higher block
        broker.delete_topic("t")
    assert set(metadata.topics()) == {"__consumer_offsets", "__txn_journal"}


def test_the_coordinator_takes_ids_and_pointers_from_the_protocols(tmp_path: Path) -> None:
    ids: IdSource = InMemoryIdSource()
    pointers = InMemoryPointer()
    journal = TxnJournal(tmp_path / "txn", pointers=pointers)
    coordinator = Coordinator(3, journal, ids, RecordingApplier())
    coordinator.recover()
    coordinator.start()
    identity = coordinator.init_producer("app", 60_000)
    assert identity.producer_id == (1 << PARTITION_BITS) | 3
    coordinator.checkpoint()
    coordinator.close()
    assert pointers.writes == 1 and not (tmp_path / "txn" / "checkpoint").exists()

    reopened = Coordinator(
        3, TxnJournal(tmp_path / "txn", pointers=pointers), ids, RecordingApplier()
    )
    reopened.recover()
    reopened.start()
    assert reopened.init_producer("app", 60_000).producer_generation == 1
    reopened.close()


# --- the local versions -------------------------------------------------------------------


def test_local_store_gives_the_directory_its_ids_once(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path, journal_partitions=2)
    assert len(bytes.fromhex(store.cluster_id)) == len(bytes.fromhex(store.data_dir_id)) == 16
    assert store.cluster_id != store.data_dir_id
    again = LocalMetadataStore(tmp_path, journal_partitions=5)
    assert (again.cluster_id, again.data_dir_id) == (store.cluster_id, store.data_dir_id)
    assert again.journal_partitions == 2  # fixed at creation


def test_local_store_adds_topics_as_creates(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path, journal_partitions=1)
    created = store.add_topic("t", 2, {"retention.ms": "5"})
    assert created.version == 0 and store.get_topic("t") is created
    with pytest.raises(TopicExistsError):
        store.add_topic("t", 3, {})
    store.remove_topic("t")
    assert "t" not in store.topics()
    # beside the journal partition it points into
    assert store.checkpoint_pointers(3).path == tmp_path / "logs" / "__txn_journal-3" / "checkpoint"


def test_a_meta_file_without_ids_is_read_and_given_them_by_the_broker_only(
    tmp_path: Path,
) -> None:
    """Files written before the ids stay readable; a read-only reader (the Spark connector)
    writes nothing, the broker's store adds the ids and keeps the rest as it was."""
    meta = tmp_path / "meta"
    topic = {"id": "ab" * 16, "partitions": 1, "config": {}}
    document = {"version": 2, "journal_partitions": 1, "topics": {"t": topic}}
    replace_file(meta, with_checksum(json.dumps(document).encode()))
    before = meta.read_bytes()
    reader = TopicRegistry(meta, journal_partitions=1)
    assert reader.cluster_id == "" and meta.read_bytes() == before
    store = LocalMetadataStore(tmp_path, journal_partitions=1)
    stored = json.loads(read_checked(meta))
    assert stored["cluster_id"] == store.cluster_id and stored["data_dir_id"] == store.data_dir_id
    assert stored["topics"] == {"t": topic} and stored["version"] == 2


def test_local_id_source_reserves_a_block_before_its_first_id(tmp_path: Path) -> None:
    source = LocalIdSource(tmp_path / "ids", block_size=5)
    first = source.next("transaction_id")
    assert json.loads(read_checked(tmp_path / "ids"))["transaction_id"] == first + 5
    assert [source.next("transaction_id") for _ in range(5)] == list(range(first + 1, first + 6))
    restarted = LocalIdSource(tmp_path / "ids", block_size=5)
    assert restarted.peek("transaction_id") == first + 10  # the rest of the block is skipped
    assert restarted.next("producer_id") == 1  # kinds are counted apart


def test_every_partition_of_a_topic_opened_through_the_store(tmp_path: Path) -> None:
    metadata = InMemoryMetadataStore()
    metadata.add_topic("pre", 2, {})  # created elsewhere (another broker, in a cluster)
    with Broker.open(tmp_path, metadata=metadata, ids=InMemoryIdSource(), **CONFIG) as broker:
        assert broker.list_topics() == ["pre"]
        broker.produce("pre", 1, batch([b"x"]))
        assert broker.describe_topic("pre").partitions[1].log_end_offset == 1
        assert TopicPartition("pre", 1) in {
            p.topic_partition for p in broker.partition_manager.all()
        }
