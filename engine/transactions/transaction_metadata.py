"""What a coordinator holds in memory per in-flight transaction and per transactional id.

``TransactionMetadata`` is one in-flight transaction (Kafka's name for the same thing);
``ProducerEntry`` is the producer of one transactional id. Their fields change only by
applying transaction-journal records (``coordinator_replay.CoordinatorMemory.apply``),
except the locks and the ``reinitialising`` counter, which are never journaled.

Names: "transaction" here is the coordinator's whole transaction, across partitions; the
local data journal's state of one transaction on one partition is a ``CopyRecord``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from twinlog.engine.base.types import TopicPartition, TransactionDescription, TransactionState


def now_ms() -> int:
    """Wall-clock time in ms: what journal records are stamped with and timeouts measured in."""
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class TransactionMetadata:
    """One in-flight transaction. Small: it must cost well under 1 KiB plus its partitions."""

    transaction_id: int
    transactional_id: str
    producer_id: int
    producer_generation: int
    state: TransactionState
    started_ms: int
    timeout_ms: int
    begin_offset: int  # journal offset of BEGIN: the checkpoint must not pass it
    request_id: int
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: dict[str, set[TopicPartition]] = field(default_factory=dict)
    # Waiting for completion uses the coordinator's one condition, not an Event per
    # transaction: an Event (a Condition and a Lock) would double the cost of an open one.
    attempts: tuple[str, ...] | None = None  # set by PREPARE_COMMIT; None = every entry
    # Partitions added without a send (AddPartitionsToTransaction, a group's offsets
    # partition): they may hold no batches at commit. None while there are none (most
    # transactions): an empty set would cost 200 bytes per open transaction.
    explicit_partitions: set[TopicPartition] | None = None
    # Set by PREPARE_COMMIT: journal entries each partition added by a send held then.
    journaled: tuple[tuple[TopicPartition, int], ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent_partitions(self) -> list[TopicPartition]:
        """Partitions added by a produce, in order: each must hold journaled batches."""
        explicit = self.explicit_partitions or set()
        return sorted(p for p in self.partitions if p not in explicit)

    def describe(self) -> TransactionDescription:
        return TransactionDescription(
            transaction_id=self.transaction_id,
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_generation=self.producer_generation,
            state=self.state,
            partitions=tuple(sorted(self.partitions)),
            groups=tuple(sorted(self.groups)),
            started_ms=self.started_ms,
            timeout_ms=self.timeout_ms,
        )


@dataclass(slots=True)
class ProducerEntry:
    transactional_id: str
    producer_id: int
    producer_generation: int
    timeout_ms: int
    transaction_id: int | None = None  # the producer's latest transaction, until complete
    # Pipelining: an earlier transaction of this producer, prepared and still being
    # completed, while ``transaction_id`` is open. At most one: a begin waits for it.
    # Derived from the journal (a BEGIN while the previous transaction is in flight).
    completing: int | None = None
    last_begin: tuple[int, int] = (-1, -1)  # (request id, transaction id) to answer a retried begin
    # (transaction id, COMMITTED/ABORTED) of this generation's last completed transaction
    # (None after a re-init): kept in the checkpoint, so a retried commit or abort is
    # answered across restarts, and an end naming no transaction (Kafka's EndTxn) finds it
    last_outcome: tuple[int, TransactionState] | None = None
    reinitialising: int = 0  # init_producer calls under way: this generation may not begin
