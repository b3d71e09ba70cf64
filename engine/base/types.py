"""Plain value types of the broker's public API (no behaviour, no I/O).

They cross every layer: the embedded ``twinlog.Broker`` returns them, the gRPC
server maps them to protobuf messages, the Python client hands them to users.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic; a plain ``(topic, partition)`` pair is accepted wherever this is."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class TransactionState(Enum):
    """A transaction's state at its coordinator (table: ``twinlog.engine.transactions.txn_state``); not the local journal's per-partition ``CopyState``."""

    ONGOING = "ONGOING"
    PREPARE_COMMIT = "PREPARE_COMMIT"
    PREPARE_ABORT = "PREPARE_ABORT"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMMITTED, TransactionState.ABORTED)


@dataclass(frozen=True)
class ProducerIdentity:
    """What ``init_producer`` returns: the id and generation to stamp on every batch."""

    producer_id: int
    producer_generation: int


@dataclass(frozen=True)
class ProduceResult:
    """Answer to one produced batch.

    ``base_offset`` is the data log offset of a plain batch, -1 for a
    transactional batch (its offsets are known only when it is applied).
    ``duplicate`` is True when the batch repeated an already-written sequence
    (a retry) and was acknowledged without being written again.
    """

    base_offset: int
    duplicate: bool = False


@dataclass(frozen=True)
class FetchResult:
    """Whole batches from ``offset`` on, as stored (``records`` may be empty).

    ``log_end_offset`` is the end a consumer may read to: the partition's high
    watermark (on one node, its log end).
    """

    records: bytes
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    log_start_offset: int
    log_end_offset: int
    journal_entries_pending: int
    journal_bytes_pending: int


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]
    config: dict[str, str] = field(default_factory=dict)
    topic_id: str = ""  # 32 hex digits: a random UUID given at creation (KIP-516)


@dataclass(frozen=True)
class TransactionDescription:
    transaction_id: int
    transactional_id: str
    producer_id: int
    producer_generation: int
    state: TransactionState
    partitions: tuple[TopicPartition, ...]
    groups: tuple[str, ...]
    started_ms: int
    timeout_ms: int

    def age_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.started_ms)


@dataclass(frozen=True)
class ProducerDescription:
    """A producer that wrote to a partition (Kafka's DescribeProducers)."""

    producer_id: int
    producer_generation: int
    last_sequence: int
    last_timestamp_ms: int
    current_transaction_id: int  # -1 when none is open on this partition


# The topic setting that names a new topic's replication factor (the cluster's, not the
# log's: the broker takes it out of the topic's config; "replication_factor" is read too).
REPLICATION_FACTOR_SETTING = "replication.factor"
