"""The broker's public API as a Protocol: what the server serves and the client calls.

``twinlog.Broker`` (embedded) and ``twinlog.rpc.client.remote.RemoteBroker`` (over gRPC)
both satisfy it, so ``Producer``, ``Consumer`` and ``Admin`` run unchanged on
either, and the server runs on anything that has these methods (tests use a
small fake).

``CoordinatorLookup`` is the FindCoordinator call, which only a server has (the embedded
broker coordinates everything itself): ``CoordinatorKeyType`` names what a key is, and
``FoundCoordinator`` is the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from twinlog.engine.base.cluster_metadata import BrokerEndpoint
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import (
    FetchResult,
    ProducerDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
)
from twinlog.engine.broker.leader_elections import ElectionResult
from twinlog.engine.broker.reassignments import MoveResult, PartitionMove, Reassignment
from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
)
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID


@runtime_checkable
class BrokerApi(Protocol):
    def close(self) -> None: ...

    # topics
    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription: ...

    def create_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> TopicDescription: ...

    def alter_topic_config(
        self,
        name: str,
        set_values: Mapping[str, str],
        deleted: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> TopicDescription: ...

    def delete_topic(self, name: str) -> None: ...

    def list_topics(self) -> list[str]: ...

    def describe_topic(self, name: str) -> TopicDescription: ...

    def auto_create_topic(
        self, name: str, creating: Callable[[], AbstractContextManager[object]] | None = None
    ) -> TopicDescription:
        """``describe_topic``, the topic created first when it does not exist (a producer's
        first send; Kafka's auto.create.topics.enable, num.partitions and default
        replication factor). ``creating`` wraps the creation only, where it happens: the
        serving door's CREATE check and audit line (a remote broker's server has its own,
        so a client's is not sent). UnknownTopicOrPartitionError when it is not created."""
        ...

    def topic_settings(self, name: str) -> list[tuple[str, str, bool]]: ...

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]: ...

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]: ...

    def partition_reassignments(self) -> list[Reassignment]: ...

    # producing
    def init_producer(
        self, transactional_id: str | None = None, transaction_timeout_ms: int | None = None
    ) -> ProducerIdentity: ...

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> ProduceResult:
        """``attempt`` tags a transactional batch with a writer's task attempt (Spark);
        ``transaction_id`` names the transaction a transactional batch belongs to (the
        batch does not: Kafka's format has no such field); ``current_leader_epoch``: the
        leader epoch the caller's metadata names (older than the leader's:
        FencedLeaderEpochError, newer: UnknownLeaderEpochError; the default: unchecked)."""
        ...

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int: ...

    def add_partitions_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None: ...

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None: ...

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """``attempts`` (None: all) names the task attempts whose batches are applied;
        ``batches_written``: the batches the producer saw written per partition (the commit
        is refused if a partition's journal holds fewer; None: not checked)."""
        ...

    def abort_transaction(
        self, transaction_id: int, producer_id: int, producer_generation: int
    ) -> None: ...

    # consuming
    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> FetchResult: ...

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int: ...

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None: ...

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]: ...

    # consumer groups
    def group_heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer: ...

    def list_groups(self) -> list[GroupListing]: ...

    def describe_group(self, group_id: str) -> GroupDescription: ...

    def delete_group(self, group_id: str) -> None: ...

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]: ...

    # admin
    def list_transactions(self) -> list[TransactionDescription]: ...

    def admin_abort_transaction(self, transaction_id: int) -> None: ...

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]: ...

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int: ...


# --- FindCoordinator -------------------------------------------------------------------

NO_COORDINATOR_PARTITION = -1  # a single node's answer for a group, or a count not known


class CoordinatorKeyType(Enum):
    TRANSACTION = "transaction"  # a transactional id
    PRODUCER_ID = "producer id"  # a producer id or transaction id, in decimal
    GROUP = "group"  # a consumer group id


@dataclass(frozen=True)
class FoundCoordinator:
    """Where a key's coordinator calls go: coordinator ``coordinator_partition`` (the
    partition it leads: of ``__txn_journal``, or of ``__consumer_offsets`` for a group;
    NO_COORDINATOR_PARTITION when not placed by partition) at ``broker``."""

    coordinator_partition: int
    broker: BrokerEndpoint


class CoordinatorLookup(Protocol):
    def find_coordinator(self, key_type: CoordinatorKeyType, key: str) -> FoundCoordinator | None:
        """The coordinator of ``key``; None when the server has no FindCoordinator call
        (older than it: its own coordinators hold every key it was sent)."""
        ...
