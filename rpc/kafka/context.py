"""What every request handler gets: the broker, where clients reach this listener, the
limits, the shutdown flag, the guard (tokens and ACLs), the calling connection's state,
the decompression budget of produced batches' rewrites and, on a cluster broker, the
cluster. One per connection: a copy of the listener's, sharing everything but
``connection``. The listener keeps no transaction state: which transaction a Kafka
producer's requests belong to is the engine's answer (``KafkaBroker``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.classic_member import ClassicMember
from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupMemberRef,
    OffsetAndMetadata,
)
from twinlog.engine.log.leader_epochs import EpochEnd
from twinlog.rpc.kafka.access import ConnectionState
from twinlog.rpc.kafka.cluster import KafkaCluster, LeaderHint
from twinlog.rpc.kafka.error_codes import code_of
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.policy.auth import Guard
from twinlog.rpc.policy.producer_access import TransactionalAccess
from twinlog.rpc.server.metrics import ServerMetrics
from twinlog.rpc.wire.broker_api import BrokerApi

# A single node's listener is the only broker a Kafka client sees: it leads every
# partition and coordinates every group and transactional id. (A cluster broker's
# answers come from ``cluster``.)
NODE_ID = 0
LEADER_EPOCH = 0


class KafkaBroker(BrokerApi, Protocol):
    """The broker API plus what Kafka's protocol needs of the engine beyond it: the answers
    for requests that name no transaction (``twinlog.engine.broker.unnamed_transactions``)
    the classic group members' state, a long poll over many partitions at once, and offsets
    with their metadata and leader epochs, and their deletion. The listener serves an
    in-process ``Broker``."""

    @property
    def cluster_id(self) -> str: ...

    def open_transaction(self, producer_id: int, producer_generation: int) -> int: ...

    def record_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> tuple[int, int] | None: ...

    def record_with_max_timestamp(self, topic: str, partition: int) -> tuple[int, int] | None: ...

    def client_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> int: ...

    def epoch_of_offset(self, topic: str, partition: int, offset: int) -> int: ...

    def end_offset_for_leader_epoch(
        self, topic: str, partition: int, leader_epoch: int, current_leader_epoch: int = -1
    ) -> EpochEnd: ...

    def consumer_divergence(
        self, topic: str, partition: int, fetch_offset: int, last_fetched_epoch: int
    ) -> EpochEnd | None: ...

    def log_dir_usage(self) -> tuple[str, list[tuple[TopicPartition, int]]]: ...

    def latest_transaction(self, producer_id: int, producer_generation: int) -> int | None: ...

    def wait_for_records(
        self, positions: Sequence[tuple[TopicPartition, int]], max_wait_ms: int
    ) -> bool: ...

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None: ...

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None: ...

    def metadata_too_large(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> set[TopicPartition]: ...

    def fetch_committed(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]: ...

    def classic_member(self, group_id: str, member_id: str) -> ClassicMember | None: ...

    def keep_classic_member(self, classic: ClassicMember) -> bool: ...


@dataclass
class KafkaContext:
    broker: KafkaBroker
    endpoint: Callable[[], tuple[str, int]]  # (host, port) clients reach, known once bound
    settings: KafkaListenerSettings
    stopping: threading.Event
    # api key -> (min, max) versions advertised in ApiVersions
    advertised_versions: Mapping[int, tuple[int, int]]
    guard: Guard
    access: TransactionalAccess  # who may use a producer id
    connection: ConnectionState
    cluster: KafkaCluster | None = None  # None: a single node
    # The gRPC server's metrics, which count the Kafka requests too (None: not counted).
    metrics: ServerMetrics | None = None
    # A request line is INFO from this long beyond the wait it asked for (the server
    # config key request_log_slow_ms, as for the gRPC door's calls); DEBUG below.
    request_log_slow_ms: int = 1_000

    def partition_refusal(
        self, error: TwinlogError, api_key: int, topic: str, partition: int
    ) -> tuple[int, LeaderHint | None]:
        """``partition_code``, and who leads the partition (``KafkaCluster.refusal``); no
        hint on a single node, which leads every partition it has."""
        if self.cluster is None:
            return code_of(error, api_key), None
        return self.cluster.refusal(error, api_key, topic, partition)

    def partition_code(self, error: TwinlogError, api_key: int, topic: str, partition: int) -> int:
        """The code for the engine's refusal of a request on one partition (Produce, Fetch,
        ListOffsets): on a cluster broker, "not here" says who should answer instead."""
        if self.cluster is None:
            return code_of(error, api_key)
        return self.cluster.partition_code(error, api_key, topic, partition)
