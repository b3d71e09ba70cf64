"""``ZooKeeperMetadataStore`` on a real ZooKeeper: one cluster per chroot, topics as
creates (exactly one of two racing brokers wins a name), checkpoint pointers written
only over the version read, and the data directory's identity kept beside the data."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from twinlog.engine.base.errors import (
    ConditionalWriteLostError,
    CorruptJournalError,
    InvalidConfigError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.data_dir_identity import IDENTITY_FILE
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.journal.txn_checkpoint_pointer import CheckpointPointer

JOIN_S = 30.0


def test_topics_round_trip_and_a_duplicate_create_is_refused(
    session: ZooKeeperSession, tmp_path: Path
) -> None:
    store: MetadataStore = ZooKeeperMetadataStore(session, tmp_path / "data", 2)
    created = store.add_topic("orders", 3, {"retention_ms": 1000})  # type: ignore[dict-item]
    assert (created.partitions, created.config, created.version) == (3, {"retention_ms": "1000"}, 0)
    assert len(created.topic_id) == 32
    read = store.get_topic("orders")
    assert (read.partitions, read.config, read.topic_id, read.version) == (
        3,
        {"retention_ms": "1000"},
        created.topic_id,
        0,
    )
    with pytest.raises(TopicExistsError, match="orders"):
        store.add_topic("orders", 1, {})
    assert store.get_topic("orders").topic_id == created.topic_id  # not overwritten
    store.add_topic("audit", 1, {})
    assert sorted(store.topics()) == ["audit", "orders"]
    store.remove_topic("orders")
    assert sorted(store.topics()) == ["audit"]
    with pytest.raises(UnknownTopicOrPartitionError):
        store.get_topic("orders")
    with pytest.raises(UnknownTopicOrPartitionError):
        store.remove_topic("orders")
    again = store.add_topic("orders", 1, {})
    assert again.topic_id != created.topic_id  # a new topic under an old name


def test_bad_names_and_counts_are_refused_before_zookeeper(
    session: ZooKeeperSession, tmp_path: Path
) -> None:
    store = ZooKeeperMetadataStore(session, tmp_path, 1)
    for name in ("a/b", "..", ""):
        with pytest.raises(InvalidConfigError):
            store.add_topic(name, 1, {})
    with pytest.raises(InvalidConfigError, match="partitions"):
        store.add_topic("t", 0, {})
    assert dict(store.topics()) == {}


def test_two_stores_racing_for_a_topic_name_exactly_one_wins(
    zk_connect: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(zk_connect) as first, ZooKeeperSession(zk_connect) as second:
        stores = [
            ZooKeeperMetadataStore(first, tmp_path / "a", 1),
            ZooKeeperMetadataStore(second, tmp_path / "b", 1),
        ]
        for round_number in range(10):
            name = f"race-{round_number}"
            outcomes = race_to_add(stores, name)
            assert sorted(outcomes).count("refused") == 1, outcomes
            winner = next(outcome for outcome in outcomes if outcome != "refused")
            assert stores[0].get_topic(name).topic_id == winner


def race_to_add(stores: list[ZooKeeperMetadataStore], name: str) -> list[str]:
    """Each store adds ``name`` at once, from a thread of its own: topic ids or "refused"."""
    start = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def add(store: ZooKeeperMetadataStore) -> None:
        start.wait(timeout=JOIN_S)
        try:
            outcomes.append(store.add_topic(name, 1, {}).topic_id)
        except TopicExistsError:
            outcomes.append("refused")

    threads = [threading.Thread(target=add, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_S)
    assert len(outcomes) == len(stores), "a thread did not finish"
    return outcomes


def test_the_first_store_creates_the_cluster_and_the_others_join_it(
    zk_connect: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(zk_connect) as first, ZooKeeperSession(zk_connect) as second:
        creator = ZooKeeperMetadataStore(first, tmp_path / "a", 4)
        joiner = ZooKeeperMetadataStore(second, tmp_path / "b", 9)  # the cluster's count wins
        assert joiner.cluster_id == creator.cluster_id and len(creator.cluster_id) == 32
        assert joiner.journal_partitions == creator.journal_partitions == 4
        assert joiner.data_dir_id != creator.data_dir_id  # one per disk
        reopened = ZooKeeperMetadataStore(second, tmp_path / "a", 4)
        assert reopened.data_dir_id == creator.data_dir_id  # from DATA_DIR/identity
        assert (tmp_path / "a" / IDENTITY_FILE).is_file()


def test_a_data_directory_of_another_cluster_is_refused(
    zookeeper: object, zk_connect: str, tmp_path: Path
) -> None:
    with ZooKeeperSession(zk_connect) as session:
        ZooKeeperMetadataStore(session, tmp_path / "data", 1)
    with ZooKeeperSession(zk_connect + "-other") as other_cluster:
        with pytest.raises(InvalidConfigError, match="belongs to cluster"):
            ZooKeeperMetadataStore(other_cluster, tmp_path / "data", 1)


def test_a_stale_pointer_write_is_refused_and_writes_nothing(
    session: ZooKeeperSession, tmp_path: Path
) -> None:
    store = ZooKeeperMetadataStore(session, tmp_path, 2)
    old = store.checkpoint_pointers(1)
    assert old.read() is None
    old.write(CheckpointPointer(10, 5))
    assert old.read() == CheckpointPointer(10, 5)

    new = store.checkpoint_pointers(1)  # a coordinator that took over reads, then writes
    assert new.read() == CheckpointPointer(10, 5)
    new.write(CheckpointPointer(20, 15))
    with pytest.raises(ConditionalWriteLostError, match="/coordinators/1"):
        old.write(CheckpointPointer(30, 25))  # the zombie's write over the version it read
    assert store.checkpoint_pointers(1).read() == CheckpointPointer(20, 15)

    never_read = store.checkpoint_pointers(1)
    with pytest.raises(ConditionalWriteLostError, match="expected no pointer"):
        never_read.write(CheckpointPointer(40, 40))  # expects none: a create
    assert store.checkpoint_pointers(0).read() is None  # each partition its own znode
    with pytest.raises(InvalidConfigError):
        store.checkpoint_pointers(2)


def test_a_pointer_publishes_its_coordinators_low_watermark(
    session: ZooKeeperSession, tmp_path: Path
) -> None:
    store = ZooKeeperMetadataStore(session, tmp_path, 2)
    pointer = store.checkpoint_pointers(0, coordinator_epoch=3)
    assert pointer.read() is None
    pointer.write(CheckpointPointer(10, 5, low_watermark=(7 << 8) | 0))
    assert store.checkpoint_pointers(0).read() == CheckpointPointer(10, 5, (7 << 8) | 0)
    pointer.write(CheckpointPointer(20, 15))  # none published: read back as none
    assert store.checkpoint_pointers(0).read() == CheckpointPointer(20, 15, None)


def test_a_znode_changed_by_hand_stops_with_its_path(
    session: ZooKeeperSession, tmp_path: Path
) -> None:
    store = ZooKeeperMetadataStore(session, tmp_path, 1)
    session.client.create(znodes.topic_path("hand"), b"{not json")
    with pytest.raises(CorruptJournalError, match="/topics/hand"):
        store.get_topic("hand")
    session.client.create(znodes.coordinator_path(0), b'{"checkpoint_offset": 1}')
    with pytest.raises(CorruptJournalError, match=r"/coordinators/0.*replay_from_offset"):
        store.checkpoint_pointers(0).read()
