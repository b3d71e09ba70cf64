"""Where the server's ``FindCoordinator`` answer comes from: the key's coordinator.

    TRANSACTION   N = coordinator_partition_of_transactional_id(key, journal_partitions)
    PRODUCER_ID   N = coordinator_partition_of(int(key))   (a producer or transaction id:
                  ids carry their coordinator partition in their low bits)
    GROUP         N = offsets_partition_for(key, partitions of __consumer_offsets)

In a cluster, transaction coordinator N is the leader of partition N of ``__txn_journal``
(CLUSTER.md §3.5), and a group's coordinator the leader of its partition N of
``__consumer_offsets`` (the answer's ``coordinator_partition``; numbered apart from the
journal's). One read of the metadata source (``ZooKeeperClusterView``: the live brokers
and that one topic's partition states) names it. A partition without a live leader
(being elected, offline, or a topic not created yet) is answered with
NotCoordinatorError, retriable: the client asks again after a pause, within its deadline.

``journal_partitions`` is the broker's own count (the cluster's, from ZooKeeper); when
the broker does not say (a test's fake), the partition count of ``__txn_journal`` in the
same read stands in for it, as partition N exists for each coordinator N.

A group's N takes the partition count of ``__consumer_offsets`` from the same read (the
topic exists once a cluster broker has created it; NotCoordinatorError until then). A
single-node server answers itself for every key (NO_COORDINATOR_PARTITION for a group).

Thread rule: any thread (the server's workers call it concurrently; nothing is kept).
"""

from __future__ import annotations

from collections.abc import Callable

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import (
    InvalidConfigError,
    InvalidTxnStateError,
    NotCoordinatorError,
)
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, offsets_partition_for
from twinlog.engine.broker.internal_topics import (
    TXN_JOURNAL_TOPIC,
    coordinator_partition_of_transactional_id,
)
from twinlog.engine.transactions.partition_calls import coordinator_partition_of
from twinlog.rpc.cluster.metadata_source import MetadataSource
from twinlog.rpc.wire.broker_api import (
    NO_COORDINATOR_PARTITION,
    CoordinatorKeyType,
    FoundCoordinator,
)


def journal_partitions_of(broker: object) -> int | None:
    """The broker's transaction journal partition count (``twinlog.Broker``'s metadata store
    holds it: the data directory's, or the cluster's in ZooKeeper); None when it has none."""
    count = getattr(getattr(broker, "metadata", None), "journal_partitions", None)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None


class CoordinatorSource:
    def __init__(
        self,
        metadata_source: MetadataSource,
        journal_partitions: Callable[[], int | None] = lambda: None,
    ) -> None:
        """``journal_partitions()``: the broker's count (None: unknown), read at each call
        (the broker may learn it after the server is built)."""
        self.metadata_source = metadata_source
        self.journal_partitions = journal_partitions

    def find(self, key_type: CoordinatorKeyType, key: str) -> FoundCoordinator:
        if key_type is CoordinatorKeyType.GROUP:
            return self._group_coordinator(key)
        journal_partitions = self.journal_partitions()
        partition = self._partition_of_id(key_type, key, journal_partitions)
        metadata = self.metadata_source.metadata([TXN_JOURNAL_TOPIC])
        if metadata.standalone:
            # A single node coordinates every key itself (its journals are local).
            if key_type is CoordinatorKeyType.TRANSACTION and journal_partitions is not None:
                partition = coordinator_partition_of_transactional_id(key, journal_partitions)
            return FoundCoordinator(partition, metadata.brokers[0])
        if key_type is CoordinatorKeyType.TRANSACTION:
            partition = coordinator_partition_of_transactional_id(
                key, self._cluster_journal_partitions(metadata, key, journal_partitions)
            )
        elif journal_partitions is None:  # the count from the topic, as above
            topic = metadata.topic(TXN_JOURNAL_TOPIC)
            if topic is not None and topic.partitions and partition >= len(topic.partitions):
                raise _not_issued(key, partition, len(topic.partitions))
        leader = metadata.leader(TXN_JOURNAL_TOPIC, partition)
        if leader is None:
            raise NotCoordinatorError(
                f"no coordinator for {_named(key_type, key)} yet: "
                f"{_why_none(metadata, TXN_JOURNAL_TOPIC, partition)}; retry (FindCoordinator) "
                "after a short pause"
            )
        return FoundCoordinator(partition, leader)

    def _group_coordinator(self, group_id: str) -> FoundCoordinator:
        """The leader of the group's ``__consumer_offsets`` partition (a single node: itself)."""
        metadata = self.metadata_source.metadata([OFFSETS_TOPIC])
        if metadata.standalone:
            return FoundCoordinator(NO_COORDINATOR_PARTITION, metadata.brokers[0])
        topic = metadata.topic(OFFSETS_TOPIC)
        partition, leader = 0, None
        if topic is not None and topic.partitions:
            partition = offsets_partition_for(group_id, len(topic.partitions)).partition
            leader = metadata.leader(OFFSETS_TOPIC, partition)
        if leader is None:
            raise NotCoordinatorError(
                f"no coordinator for group {group_id!r} yet: "
                f"{_why_none(metadata, OFFSETS_TOPIC, partition)}; retry (FindCoordinator) "
                "after a short pause"
            )
        return FoundCoordinator(partition, leader)

    @staticmethod
    def _partition_of_id(
        key_type: CoordinatorKeyType, key: str, journal_partitions: int | None
    ) -> int:
        """A producer or transaction id's partition; a transactional id's is found later
        (it needs the count). Checks both kinds of key."""
        if key_type is CoordinatorKeyType.TRANSACTION and not key:
            raise InvalidConfigError("FindCoordinator: the transactional id is empty")
        if key_type is not CoordinatorKeyType.PRODUCER_ID:
            return NO_COORDINATOR_PARTITION
        if not key.isascii() or not key.isdigit():
            raise InvalidConfigError(
                f"FindCoordinator: {key!r} is not a producer id or transaction id "
                "(a decimal number, 0 or more)"
            )
        partition = coordinator_partition_of(int(key))
        if journal_partitions is not None and partition >= journal_partitions:
            raise _not_issued(key, partition, journal_partitions)
        return partition

    @staticmethod
    def _cluster_journal_partitions(
        metadata: ClusterMetadata, key: str, journal_partitions: int | None
    ) -> int:
        if journal_partitions is not None:
            return journal_partitions
        topic = metadata.topic(TXN_JOURNAL_TOPIC)
        if topic is None or not topic.partitions:
            raise NotCoordinatorError(
                f"no coordinator for transactional id {key!r} yet: topic {TXN_JOURNAL_TOPIC} "
                "does not exist yet (the cluster is starting); retry after a short pause"
            )
        return len(topic.partitions)


def _not_issued(key: str, partition: int, journal_partitions: int) -> InvalidTxnStateError:
    """As the broker answers an id no coordinator of its own issued."""
    return InvalidTxnStateError(
        f"id {key} was not issued by this cluster: its coordinator partition {partition} "
        f"is not one of the {journal_partitions} journal partitions"
    )


def _named(key_type: CoordinatorKeyType, key: str) -> str:
    if key_type is CoordinatorKeyType.TRANSACTION:
        return f"transactional id {key!r}"
    return f"producer/transaction id {key}"


def _why_none(metadata: ClusterMetadata, name: str, partition: int) -> str:
    where = f"partition {partition} of {name}"
    topic = metadata.topic(name)
    if topic is None or not topic.partitions:
        return f"topic {name} does not exist yet (the cluster is starting)"
    found = topic.partition(partition)
    if found is None:
        return f"{where} does not exist (the topic has {len(topic.partitions)} partitions)"
    if found.offline:
        return f"{where} has no leader (being elected, or every replica is down)"
    return f"{where} is led by broker {found.leader_id}, which is not registered (restarting?)"
