"""The listener on a cluster broker: who leads each partition and who coordinates each key,
as Kafka clients must be told.

    KafkaCluster(broker_id, metadata_source)      # the gRPC server's ZooKeeper view

Every broker registers its Kafka listener's address with its ZooKeeper registration
(``brokers/ids/<id>``), so the view names each live broker's Kafka address: Metadata lists
the brokers that have one, with each partition's leader, replicas and ISR as ZooKeeper
holds them, and FindCoordinator names the broker leading the key's coordinator partition
(``CoordinatorSource``, as the gRPC server answers). A broker without a Kafka listener is
left out of the broker list; a partition it leads is answered LISTENER_NOT_FOUND.

A transactional batch comes to the partition's leader, while the producer's transaction
was begun at its coordinator (AddPartitionsToTxn), maybe on another broker: the leader's
engine finds it (``engine.broker.unnamed_transactions``: its partition's gate once the
transaction registered there, the coordinator for the first batch), as on a single node.

The engine itself refuses what this broker does not lead (NotLeaderOrFollowerError,
NotCoordinatorError; UnknownTopicOrPartitionError for a partition it holds no replica
of). ``partition_code`` turns such a refusal of Produce, Fetch or ListOffsets into what a
Kafka client acts on: NOT_LEADER_OR_FOLLOWER when another broker leads the partition,
LEADER_NOT_AVAILABLE when none does (offline, or being elected); either way the client
refreshes its metadata and retries.

Thread rule: any thread (the connections' threads call it concurrently; nothing is kept).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.cluster.coordinator_source import CoordinatorSource, journal_partitions_of
from twinlog.rpc.cluster.metadata_source import MetadataSource
from twinlog.rpc.kafka.error_codes import (
    FENCED_LEADER_EPOCH,
    LEADER_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    code_of,
)
from twinlog.rpc.wire.broker_api import BrokerApi, CoordinatorKeyType, FoundCoordinator

log = logging.getLogger("twinlog.kafka")

# Refusals that may only mean "not here": the cluster's state says which.
NOT_HERE_CODES = (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION)


@dataclass(frozen=True)
class LeaderHint:
    leader_id: int
    leader_epoch: int
    endpoint: tuple[str, int] | None  # its Kafka listener (host, port); None: it has none


class KafkaCluster:
    def __init__(self, broker_id: int, metadata_source: MetadataSource, broker: BrokerApi) -> None:
        self.broker_id = broker_id
        self.metadata_source = metadata_source
        self.coordinators = CoordinatorSource(
            metadata_source, journal_partitions=lambda: journal_partitions_of(broker)
        )

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        """Raises what the view raises (ZooKeeper unreachable: retriable)."""
        return self.metadata_source.metadata(topics)

    def find_coordinator(self, key_type: CoordinatorKeyType, key: str) -> FoundCoordinator:
        """The broker coordinating ``key``; NotCoordinatorError when none does yet."""
        return self.coordinators.find(key_type, key)

    def close(self) -> None:
        """Nothing to close: the calls to other brokers are the broker's own."""

    def partition_code(self, error: TwinlogError, api_key: int, topic: str, partition: int) -> int:
        """The code for the engine's refusal of a partition request (``refusal``)."""
        return self.refusal(error, api_key, topic, partition)[0]

    def refusal(
        self, error: TwinlogError, api_key: int, topic: str, partition: int
    ) -> tuple[int, LeaderHint | None]:
        """The code for the engine's refusal of a partition request, and who leads the
        partition, from one read of the cluster's state: a "not here" refusal says
        NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE, as that state has it; with it and
        with FENCED_LEADER_EPOCH, the leader, its epoch and its Kafka listener (KIP-951: a
        client goes there without a Metadata request). No hint when the partition has no
        leader or the state is not readable now."""
        code = code_of(error, api_key)
        if code not in NOT_HERE_CODES and code != FENCED_LEADER_EPOCH:
            return code, None
        try:
            metadata = self.metadata([topic])
        except TwinlogError as reading:  # ZooKeeper away: the engine's code is still true
            log.info("Kafka: the leader of %s-%d not read: %s", topic, partition, reading)
            return code, None
        found = metadata.partition(topic, partition)
        if found is None:
            return code, None  # no such partition in the cluster (or the topic is gone)
        if found.offline:
            return (LEADER_NOT_AVAILABLE if code in NOT_HERE_CODES else code), None
        leader = metadata.broker(found.leader_id)
        hint = LeaderHint(
            found.leader_id, found.leader_epoch, None if leader is None else leader.kafka_address
        )
        return (NOT_LEADER_OR_FOLLOWER if code in NOT_HERE_CODES else code), hint
