"""The embedded broker on the ZooKeeper versions of MetadataStore and IdSource: topics,
ids and checkpoint pointers live in ZooKeeper, and a reopened broker finds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import ProducerFencedError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.engine.broker.topic_registry import TopicMeta
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.engine.transactions.coordinator import PARTITION_BITS
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.id_source import ZooKeeperIdSource
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer

CONFIG = {"journal_partitions": 1, "checkpoint_interval_ms": 3_600_000}


def values(broker: Broker, topic: str) -> list[bytes | None]:
    fetched = broker.fetch(topic, 0, 0, max_bytes=1 << 20)
    return [record.value for b in iter_batches(fetched.records) for record in b.records()]


def open_broker(session: ZooKeeperSession, data_dir: Path) -> Broker:
    metadata = ZooKeeperMetadataStore(session, data_dir, CONFIG["journal_partitions"])
    return Broker.open(data_dir, metadata=metadata, ids=ZooKeeperIdSource(session), **CONFIG)


def test_a_broker_on_zookeeper_keeps_topics_ids_and_its_checkpoint_there(
    zk_connect: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    with ZooKeeperSession(zk_connect) as session, open_broker(session, data_dir) as broker:
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
        assert sorted(session.client.get_children(znodes.TOPICS)) == [
            "__consumer_offsets",
            "__txn_journal",
            "t",
        ]
        assert sorted(session.client.get_children(znodes.ID_BLOCKS)) == [
            "producer_id",
            "transaction_id",
        ]
        pointer = ZooKeeperMetadataStore(session, data_dir, 1).checkpoint_pointers(0).read()
        assert pointer == CheckpointPointer(
            checkpoint.checkpoint_offset,
            checkpoint.replay_from_offset,
            pointer.low_watermark,  # published with it (nothing in flight: the next id)
        )
        assert pointer.low_watermark is not None and pointer.low_watermark & 0xFF == 0
    assert identity.producer_id >> PARTITION_BITS == 1  # the cluster's first producer id
    for local_file in ("meta", "ids", "txn/0/checkpoint"):
        assert not (data_dir / local_file).exists(), local_file

    with ZooKeeperSession(zk_connect) as session, open_broker(session, data_dir) as broker:
        assert broker.list_topics() == ["t"]
        assert values(broker, "t") == [b"plain", b"txn"]
        again = broker.init_producer("app")
        assert again.producer_id == identity.producer_id
        assert again.producer_generation == identity.producer_generation + 1
        with pytest.raises(ProducerFencedError):
            broker.begin_transaction(identity.producer_id, identity.producer_generation)
        next_transaction = broker.begin_transaction(again.producer_id, again.producer_generation)
        assert next_transaction > transaction_id  # a fresh, higher block from ZooKeeper
        broker.delete_topic("t")
        assert session.client.get_children(znodes.TOPICS) == ["__consumer_offsets", "__txn_journal"]


class _ListingBeforeAnotherBrokersCreate(ZooKeeperMetadataStore):
    """Its first topic listing is the one a broker read just before another broker,
    starting at the same time on a new cluster, created ``__consumer_offsets``."""

    listed = False

    def topics(self) -> dict[str, TopicMeta]:
        topics = dict(super().topics())
        if not self.listed:
            self.listed = True
            topics.pop(OFFSETS_TOPIC, None)
        return topics


def test_two_brokers_starting_together_on_a_new_cluster_both_open(
    zk_connect: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(zk_connect) as session:
        with open_broker(session, tmp_path / "first"):
            pass  # created __consumer_offsets
        metadata = _ListingBeforeAnotherBrokersCreate(session, tmp_path / "second", 1)
        with Broker.open(
            tmp_path / "second", metadata=metadata, ids=ZooKeeperIdSource(session), **CONFIG
        ) as second:
            assert OFFSETS_TOPIC in second.metadata.topics()  # list_topics hides it
