"""Per-partition batching of a producer's records (Kafka's RecordAccumulator).

Records go into the open batch of their partition until it holds ``batch_bytes``
or ``linger_ms`` passed since its first record; then it is ready. A partition has
at most one batch in flight (so a retry can never be overtaken by a later batch
of the same partition, and sequences stay gap-free); a failed batch that may be
retried goes back to the front of its partition's queue, bytes unchanged. A batch
still queued when its delivery deadline passes is taken out (``take_expired``) and
failed by the sender.

Thread rule: every method is called with the producer's lock held.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Container, Iterator
from dataclasses import dataclass, field

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID
from twinlog.rpc.client.futures import BatchFuture, BatchResult, RecordFuture
from twinlog.rpc.client.record_fields import (
    RECORD_OVERHEAD_BYTES,
    PreparedRecord,
    PreparedRecords,
)


@dataclass(eq=False)
class ProducerBatch:
    topic_partition: TopicPartition
    builder: RecordBatchBuilder
    created_s: float  # monotonic
    deadline_s: float  # monotonic; a retry after this fails the batch
    transaction_id: int = NO_TRANSACTION_ID
    result: BatchResult = field(init=False)  # base offset, or the error
    record_count: int = 0
    closed: bool = False  # no more appends
    payload: bytes | None = None  # the built batch; once set, resent unchanged
    base_sequence: int = -1
    attempts: int = 0
    retry_at_s: float = 0.0
    accounted_bytes: int = 0  # this batch's share of Accumulator.buffered_bytes
    expired: bool = False  # failed at its delivery deadline while its request was unanswered
    last_error: TwinlogError | None = None  # of its latest failed attempt

    def __post_init__(self) -> None:
        self.result = BatchResult(
            self.topic_partition.topic,
            self.topic_partition.partition,
            self.transaction_id != NO_TRANSACTION_ID,
        )

    @property
    def size_bytes(self) -> int:
        return len(self.payload) if self.payload is not None else self.builder.estimated_size_bytes


class Accumulator:
    def __init__(self, compression: str, batch_bytes: int, linger_ms: int) -> None:
        self.compression = compression
        self.batch_bytes = batch_bytes
        self.linger_s = linger_ms / 1000
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.buffered_bytes = 0  # estimated bytes of every batch not yet acknowledged

    def __iter__(self) -> Iterator[ProducerBatch]:
        for queue in self.queues.values():
            yield from queue

    def is_empty(self) -> bool:
        return not any(self.queues.values())

    def append(
        self,
        topic_partition: TopicPartition,
        record: PreparedRecord,
        timestamp_ms: int,
        transaction_id: int,
        now_s: float,
        delivery_timeout_s: float,
    ) -> tuple[RecordFuture, ProducerBatch, bool]:
        """Add a record; return its future, its batch, and whether that batch is now full.

        ``record`` was checked (``prepare_record``) before any batch is chosen or made, so
        the builder's append cannot fail half-way and leave a torn or empty batch behind.
        """
        batch = self._open_batch(
            topic_partition, record.size_bytes, transaction_id, now_s, delivery_timeout_s
        )
        builder = batch.builder
        before = builder.estimated_size_bytes
        offset_delta = builder.append(record.value, record.key, record.headers, timestamp_ms)
        future = RecordFuture(batch.result, offset_delta, timestamp_ms)
        return future, batch, self._grown(batch, before)

    def append_value(
        self,
        topic: str,
        partition: int,
        value: bytes,
        timestamp_ms: int,
        transaction_id: int,
        delivery_timeout_s: float,
    ) -> tuple[RecordFuture, ProducerBatch, bool]:
        """``append`` of a key-less, header-less record of bytes already checked against
        the producer's ``batch_bytes_max``: the producer's common case, in fewer steps
        (the open batch is found without building a TopicPartition: a plain tuple has
        the same hash and equality)."""
        queue = self.queues.get((topic, partition))  # type: ignore[call-overload]
        batch = queue[-1] if queue else None
        record_bytes = len(value) + RECORD_OVERHEAD_BYTES
        before = -1  # the open batch's size, if the record joins it
        if batch is not None and not batch.closed and batch.transaction_id == transaction_id:
            before = batch.builder.estimated_size_bytes
            if before + record_bytes > self.batch_bytes:
                before = -1
        if batch is None or before < 0:
            batch = self._open_batch(
                TopicPartition(topic, partition),
                record_bytes,
                transaction_id,
                time.monotonic(),
                delivery_timeout_s,
            )
            before = batch.builder.estimated_size_bytes
        builder = batch.builder
        offset_delta = builder.append_value(value, timestamp_ms)
        # _grown, written out for the hot path
        size_bytes = builder.estimated_size_bytes
        batch.accounted_bytes += size_bytes - before
        self.buffered_bytes += size_bytes - before
        batch.record_count = offset_delta + 1
        full = size_bytes >= self.batch_bytes
        if full:
            batch.closed = True
        future = RecordFuture(batch.result, offset_delta, timestamp_ms)
        return future, batch, full

    def append_many(
        self,
        topic_partition: TopicPartition,
        records: PreparedRecords,
        start: int,
        timestamp_ms: int,
        transaction_id: int,
        now_s: float,
        delivery_timeout_s: float,
        future: BatchFuture,
    ) -> tuple[int, ProducerBatch, bool]:
        """Add ``records`` from ``start`` to one batch (the open one, else a new one) while
        they fit; note the span in ``future``. Return the index after the last record
        added, the batch and whether it is now full. Adds at least one record (a record
        that does not fit the open batch starts a new one); checked records only."""
        batch = self._open_batch(
            topic_partition, records.size_bytes[start], transaction_id, now_s, delivery_timeout_s
        )
        builder = batch.builder
        before = builder.estimated_size_bytes
        first_delta = len(builder)
        reached = builder.append_many(
            records.values,
            records.keys,
            records.headers,
            timestamp_ms,
            start,
            self.batch_bytes,  # the open batch was chosen because the next record fits
        )
        assert reached > start, "a batch chosen for a record takes it"
        future.spans.append((batch.result, first_delta, reached - start))
        full = self._grown(batch, before) or reached < len(records)
        batch.closed = batch.closed or full
        return reached, batch, full

    def _grown(self, batch: ProducerBatch, size_bytes_before: int) -> bool:
        """Records were added to ``batch``: count its new bytes and records; close it and
        return True if it is now full."""
        size_bytes = batch.builder.estimated_size_bytes
        batch.accounted_bytes += size_bytes - size_bytes_before
        self.buffered_bytes += size_bytes - size_bytes_before
        batch.record_count = len(batch.builder)
        if size_bytes >= self.batch_bytes:
            batch.closed = True
            return True
        return False

    def _open_batch(
        self,
        topic_partition: TopicPartition,
        record_bytes: int,
        transaction_id: int,
        now_s: float,
        delivery_timeout_s: float,
    ) -> ProducerBatch:
        """The partition's open batch if a record of ``record_bytes`` fits in it, else a
        new one (the open one is closed)."""
        queue = self.queues.get(topic_partition)
        if queue is None:
            queue = self.queues[topic_partition] = deque()
        batch = queue[-1] if queue else None
        if (
            batch is None
            or batch.closed
            or batch.transaction_id != transaction_id
            or (
                batch.record_count
                and batch.builder.estimated_size_bytes + record_bytes > self.batch_bytes
            )
        ):
            if batch is not None:
                batch.closed = True
            batch = ProducerBatch(
                topic_partition,
                RecordBatchBuilder(
                    self.compression, transactional=transaction_id != NO_TRANSACTION_ID
                ),
                created_s=now_s,
                deadline_s=now_s + delivery_timeout_s,
                transaction_id=transaction_id,
            )
            queue.append(batch)
        return batch

    def drain(
        self, now_s: float, in_flight: Container[TopicPartition], flushing: bool
    ) -> tuple[list[ProducerBatch], float | None]:
        """Ready head batches of partitions with nothing in flight, and when to look again."""
        ready: list[ProducerBatch] = []
        wake_s: float | None = None
        for topic_partition, queue in self.queues.items():
            if not queue or topic_partition in in_flight:
                continue
            head = queue[0]
            if head.attempts:  # a retry
                due_s = head.retry_at_s
            elif head.closed or flushing:
                due_s = now_s
            else:
                due_s = head.created_s + self.linger_s
            if due_s <= now_s:
                head.closed = True
                ready.append(queue.popleft())
            elif wake_s is None or due_s < wake_s:
                wake_s = due_s
        return ready, wake_s

    def requeue(self, batch: ProducerBatch) -> None:
        self.queues.setdefault(batch.topic_partition, deque()).appendleft(batch)

    def release(self, batch: ProducerBatch) -> None:
        """The batch is done (acknowledged or failed): its bytes leave the buffer."""
        self.buffered_bytes -= batch.accounted_bytes
        batch.accounted_bytes = 0

    def take_expired(self, now_s: float) -> list[ProducerBatch]:
        """Remove and return every queued batch whose delivery deadline has passed."""
        expired: list[ProducerBatch] = []
        for queue in self.queues.values():
            if any(batch.deadline_s <= now_s for batch in queue):
                expired.extend(batch for batch in queue if batch.deadline_s <= now_s)
                kept = [batch for batch in queue if batch.deadline_s > now_s]
                queue.clear()
                queue.extend(kept)
        return expired

    def earliest_deadline_s(self) -> float | None:
        """The first delivery deadline among queued batches (None when none is queued)."""
        return min((batch.deadline_s for batch in self), default=None)

    def take_built(self) -> list[ProducerBatch]:
        """Remove and return every queued batch already built (its sequences are taken)."""
        built = [batch for batch in self if batch.payload is not None]
        for queue in self.queues.values():
            for batch in built:
                if batch in queue:
                    queue.remove(batch)
        return built

    def take_unsent(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (for an abort or a fatal error)."""
        taken = [batch for queue in self.queues.values() for batch in queue]
        for queue in self.queues.values():
            queue.clear()
        return taken
