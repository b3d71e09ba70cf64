"""``Producer``: batched, idempotent, optionally transactional writes.

    with Producer("127.0.0.1:7070", transactional_id="orders-app") as producer:
        producer.init_transactions()
        with producer.transaction():
            producer.send("orders", b"42 EUR", key=b"customer-7")

``send`` returns a future at once; a sender thread builds one batch per
partition (``batch_bytes``, ``linger_ms``), sends it (pipelined over one gRPC
stream, at most one batch in flight per partition) and resolves the futures.
Retriable errors are retried with backoff until ``delivery_timeout_ms``;
ProducerFencedError is fatal: every later call raises it.

Sequences (the broker's duplicate check): records are numbered per partition
from 0 for an idempotent producer, per (transaction, partition) from 0 for a
transactional one. A batch keeps its bytes and sequence across retries, so the
broker drops a repeat.

Thread rule: ``send`` and ``flush`` may be called from any thread; the
transaction methods from one thread at a time; callbacks of the returned
futures run on the client's I/O thread and must not block.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from enum import Enum
from typing import Any

from twinlog.engine.base.errors import (
    DuplicateSequenceError,
    InvalidConfigError,
    InvalidTxnStateError,
    NotEnoughResourcesError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RequestTimedOutError,
    TwinlogError,
    UnknownProducerIdError,
)
from twinlog.engine.base.types import ProduceResult, ProducerIdentity, TopicPartition
from twinlog.engine.records.batch_builder import Header
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID
from twinlog.rpc.client.accumulator import Accumulator, ProducerBatch
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.futures import RecordFuture
from twinlog.rpc.client.partitioner import StickyPartitioner
from twinlog.rpc.client.produce_stream import ProducePipe, open_pipe
from twinlog.rpc.client.record_fields import prepare_record
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry

log = logging.getLogger("twinlog.client")

COMPRESSIONS = ("zstd", "none")
KIBIBYTE = 1024
# The largest batch (so the largest record) a producer sends: the server's default
# max_batch_bytes, so that a record the server would refuse is refused before queuing.
MAX_BATCH_BYTES_DEFAULT = 8 * 1024 * KIBIBYTE
# An error that leaves a batch's fate unknown: the idempotent producer starts afresh
# (new producer id) rather than risk a later batch being taken for a duplicate.
SEQUENCE_BREAKING_ERRORS = (OutOfOrderSequenceError, UnknownProducerIdError, RequestTimedOutError)


class TxnPhase(Enum):
    UNINITIALISED = "uninitialised"  # transactional, init_transactions() not called yet
    READY = "ready"  # no transaction open
    IN_TRANSACTION = "in transaction"
    ABORTABLE = "abortable"  # a send failed; the transaction can only be aborted
    FATAL = "fatal"  # fenced; close the producer


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _as_offsets(
    offsets: Mapping[Any, int] | Iterable[tuple[Any, int]],
) -> dict[TopicPartition, int]:
    items = offsets.items() if isinstance(offsets, Mapping) else offsets
    return {TopicPartition(*topic_partition): int(offset) for topic_partition, offset in items}


class Producer:
    def __init__(
        self,
        target: Target,
        transactional_id: str | None = None,
        *,
        compression: str = "zstd",
        linger_ms: int = 5,
        batch_bytes: int = 256 * KIBIBYTE,
        max_batch_bytes: int = MAX_BATCH_BYTES_DEFAULT,
        buffer_bytes_max: int = 32 * 1024 * KIBIBYTE,
        max_block_ms: int = 60_000,
        delivery_timeout_ms: int = 120_000,
        transaction_timeout_ms: int | None = None,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        if compression not in COMPRESSIONS:
            raise InvalidConfigError(
                f"compression {compression!r} is not one of {', '.join(COMPRESSIONS)}"
            )
        if batch_bytes <= 0 or linger_ms < 0 or buffer_bytes_max < batch_bytes:
            raise InvalidConfigError(
                "need batch_bytes > 0, linger_ms >= 0 and buffer_bytes_max >= batch_bytes"
            )
        if max_batch_bytes < batch_bytes:
            raise InvalidConfigError(
                f"max_batch_bytes ({max_batch_bytes}) is below batch_bytes ({batch_bytes}); "
                "batch_bytes is the size batches aim at, max_batch_bytes the hard limit"
            )
        options = connection or ConnectionOptions(**connection_options)
        self._broker, self._owns_broker = connect(target, options)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.max_block_s = max_block_ms / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.retry = retry or RetryPolicy(timeout_ms=delivery_timeout_ms)
        self.max_batch_bytes = max_batch_bytes
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._accumulator = Accumulator(compression, batch_bytes, linger_ms)
        self._buffer_bytes_max = buffer_bytes_max
        self._partitioner = StickyPartitioner()
        self._partition_counts: dict[str, int] = {}
        self._in_flight: set[TopicPartition] = set()
        self._next_sequence: dict[TopicPartition, int] = {}
        self._identity: ProducerIdentity | None = None
        self._phase = TxnPhase.UNINITIALISED if transactional_id else TxnPhase.READY
        self._transaction_id = NO_TRANSACTION_ID
        self._failure: TwinlogError | None = None  # why the phase is ABORTABLE or FATAL
        self._request_ids = itertools.count(secrets.randbits(40) << 20)
        self._flushing = 0
        self._closing = False
        self._pipe: ProducePipe = open_pipe(self._broker)
        self._sender = threading.Thread(target=self._run, name="twinlog-producer", daemon=True)
        self._sender.start()

    # --- context manager -------------------------------------------------------------------

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- sending --------------------------------------------------------------------------------

    def partitions_for(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            description = call_with_retry(
                self.retry, lambda: self._broker.describe_topic(topic), "describe_topic"
            )
            count = self._partition_counts[topic] = len(description.partitions)
        return count

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue a record; the future gives its RecordMetadata once the broker has it.

        Raises TypeError for a value, key or header that is not bytes (or None), and
        RecordTooLargeError for a record larger than ``max_batch_bytes``; nothing is queued.
        """
        record = prepare_record(value, key, headers, self.max_batch_bytes)
        for name, number in (("partition", partition), ("timestamp_ms", timestamp_ms)):
            if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
                raise TypeError(f"{name} must be an int or None, not {type(number).__name__}")
        count = self.partitions_for(topic) if partition is None else 0
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        deadline_s = time.monotonic() + self.max_block_s
        with self._changed:
            self._check_can_send()
            while self._accumulator.buffered_bytes >= self._buffer_bytes_max and not self._closing:
                remaining_s = deadline_s - time.monotonic()
                if remaining_s <= 0:
                    raise NotEnoughResourcesError(
                        f"the producer buffer holds {self._accumulator.buffered_bytes} bytes "
                        f"(buffer_bytes_max={self._buffer_bytes_max}) and did not drain within "
                        f"max_block_ms={int(self.max_block_s * 1000)}; is the server reachable?"
                    )
                self._changed.wait(remaining_s)
                self._check_can_send()
            if partition is None:
                partition = self._partitioner.partition(topic, record.key, count)
            topic_partition = TopicPartition(topic, partition)
            future, batch, full = self._accumulator.append(
                topic_partition,
                record,
                timestamp_ms,
                self._transaction_id,
                time.monotonic(),
                self.delivery_timeout_s,
            )
            if full and record.key is None and count:
                self._partitioner.batch_closed(topic, partition, count)
            if full or batch.record_count == 1:
                self._changed.notify_all()
        return future

    def _check_can_send(self) -> None:
        if self._closing:
            raise InvalidTxnStateError("the producer is closed; create a new one")
        if self._phase is TxnPhase.FATAL or self._phase is TxnPhase.ABORTABLE:
            assert self._failure is not None
            raise self._failure
        if self.transactional_id and self._phase is not TxnPhase.IN_TRANSACTION:
            raise InvalidTxnStateError(
                f"transactional producer {self.transactional_id!r} is {self._phase.value}: "
                "call begin_transaction() before send()"
                + (
                    " (and init_transactions() first)"
                    if self._phase is TxnPhase.UNINITIALISED
                    else ""
                )
            )

    def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued and wait for the answers (their errors are in the futures)."""
        deadline_s = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        with self._changed:
            self._flushing += 1
            self._changed.notify_all()
            try:
                while not (self._accumulator.is_empty() and not self._in_flight):
                    remaining_s = None if deadline_s is None else deadline_s - time.monotonic()
                    if remaining_s is not None and remaining_s <= 0:
                        raise RequestTimedOutError(
                            f"flush did not complete within {timeout_ms} ms; records are still "
                            "queued or in flight"
                        )
                    self._changed.wait(remaining_s)
            finally:
                self._flushing -= 1

    def close(self, timeout_ms: int | None = None) -> None:
        """Flush, stop the sender thread and release the connection. Idempotent."""
        if self._closing:
            return
        with contextlib.suppress(TwinlogError):
            self.flush(timeout_ms)
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._sender.join(timeout=None if timeout_ms is None else timeout_ms / 1000)
        self._pipe.close()
        if self._owns_broker:
            self._broker.close()

    # --- the sender thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batches = self._next_batches()
            if batches is None:
                return
            for batch in batches:
                self._send(batch)

    def _next_batches(self) -> list[ProducerBatch] | None:
        """Wait for ready batches and mark their partitions in flight; None once closing."""
        with self._changed:
            while not self._closing:
                now_s = time.monotonic()
                batches, wake_s = self._accumulator.drain(
                    now_s, self._in_flight, self._flushing > 0
                )
                if batches:
                    for batch in batches:
                        topic, partition = batch.topic_partition
                        count = self._partition_counts.get(topic)
                        if count:  # keyless records move on to the next partition
                            self._partitioner.batch_closed(topic, partition, count)
                    self._in_flight.update(batch.topic_partition for batch in batches)
                    return batches
                self._changed.wait(None if wake_s is None else max(0.0, wake_s - now_s))
            unsent = self._accumulator.take_unsent()
            for batch in unsent:
                self._accumulator.release(batch)
        self._fail_batches(
            unsent, InvalidTxnStateError("the producer was closed before this record was sent")
        )
        return None

    def _ensure_identity(self) -> ProducerIdentity:
        with self._lock:
            identity = self._identity
        if identity is None:  # an idempotent producer gets its id on first use
            identity = call_with_retry(
                self.retry, lambda: self._broker.init_producer(None), "init_producer"
            )
            with self._lock:
                self._identity = identity
        return identity

    def _send(self, batch: ProducerBatch) -> None:
        try:
            if batch.payload is None:
                identity = self._ensure_identity()
                with self._lock:
                    topic_partition = batch.topic_partition
                    batch.base_sequence = self._next_sequence.get(topic_partition, 0)
                    self._next_sequence[topic_partition] = batch.base_sequence + batch.record_count
                builder = batch.builder
                builder.producer_id = identity.producer_id
                builder.producer_generation = identity.producer_generation
                builder.base_sequence = batch.base_sequence
                batch.payload = builder.build()
            topic, partition = batch.topic_partition
            future = self._pipe.submit(topic, partition, batch.payload)
        except Exception as error:
            failed: Future[ProduceResult] = Future()
            failed.set_exception(error)
            future = failed
        future.add_done_callback(lambda done: self._on_done(batch, done))

    def _on_done(self, batch: ProducerBatch, done: Future[ProduceResult]) -> None:
        error: TwinlogError | None = None
        result = None
        try:
            result = done.result()
        except DuplicateSequenceError:
            result = ProduceResult(-1, duplicate=True)  # written by an earlier attempt
        except TwinlogError as caught:
            error = caught
        except Exception as caught:  # a bug or a cancelled future: fail the batch, loudly
            log.exception("produce of %s failed unexpectedly", batch.topic_partition)
            error = TwinlogError(f"produce failed unexpectedly: {caught!r}")
        with self._changed:
            self._in_flight.discard(batch.topic_partition)
            now_s = time.monotonic()
            if error is not None and error.retriable and self._phase is not TxnPhase.FATAL:
                pause_s = self.retry.pause_ms(batch.attempts + 1) / 1000
                if now_s + pause_s < batch.deadline_s:
                    batch.attempts += 1
                    batch.retry_at_s = now_s + pause_s
                    log.debug("retrying %s: %s", batch.topic_partition, error)
                    self._accumulator.requeue(batch)
                    self._changed.notify_all()
                    return
            self._accumulator.release(batch)
            also_failed: list[ProducerBatch] = []
            if error is not None:
                also_failed = self._record_failure(batch, error)
            self._changed.notify_all()
        if error is not None:
            self._fail_batches([batch, *also_failed], error)
        else:
            assert result is not None
            self._complete(batch, result)

    def _record_failure(self, batch: ProducerBatch, error: TwinlogError) -> list[ProducerBatch]:
        """A batch failed for good: what that means for the producer. Lock held.

        Returns other queued batches that fail with it (the caller fails them unlocked).
        """
        if isinstance(error, ProducerFencedError):
            self._phase, self._failure = TxnPhase.FATAL, error
            unsent = self._accumulator.take_unsent()
            for item in unsent:
                self._accumulator.release(item)
            return unsent
        if self.transactional_id:
            if self._phase is TxnPhase.IN_TRANSACTION:
                self._phase, self._failure = TxnPhase.ABORTABLE, error
            return []
        if isinstance(error, SEQUENCE_BREAKING_ERRORS) or error.retriable:
            # Unknown whether the broker has it: start a new idempotent producer id.
            log.warning("producer sequence broken by %s; taking a new producer id", error)
            self._identity = None
            self._next_sequence.clear()
            built = [item for item in self._accumulator if item.payload is not None]
            for queue in self._accumulator.queues.values():
                for item in built:
                    if item in queue:
                        queue.remove(item)
            for item in built:
                self._accumulator.release(item)
            return built
        # Definitely not written (refused before writing): its sequences can be reused.
        topic_partition = batch.topic_partition
        if self._next_sequence.get(topic_partition) == batch.base_sequence + batch.record_count:
            self._next_sequence[topic_partition] = batch.base_sequence
        return []

    @staticmethod
    def _fail_batches(batches: Iterable[ProducerBatch], error: BaseException) -> None:
        for batch in batches:
            if not batch.result.done():
                batch.result.set_exception(error)

    @staticmethod
    def _complete(batch: ProducerBatch, result: ProduceResult) -> None:
        if not batch.result.done():
            batch.result.set_result(result.base_offset)

    # --- transactions -------------------------------------------------------------------------

    def _require_transactional(self, what: str) -> ProducerIdentity:
        if not self.transactional_id:
            raise InvalidTxnStateError(
                f"{what} needs a transactional producer: pass transactional_id= to Producer()"
            )
        if self._phase is TxnPhase.FATAL:
            assert self._failure is not None
            raise self._failure
        if self._identity is None or self._phase is TxnPhase.UNINITIALISED:
            raise InvalidTxnStateError(f"call init_transactions() before {what}")
        return self._identity

    def _fenced_guard(self, error: TwinlogError) -> TwinlogError:
        if isinstance(error, ProducerFencedError):
            with self._lock:
                self._phase, self._failure = TxnPhase.FATAL, error
        return error

    def init_transactions(self) -> ProducerIdentity:
        """Register the transactional id (fencing older producers with the same id)."""
        if not self.transactional_id:
            raise InvalidTxnStateError(
                "init_transactions() needs a transactional producer: pass transactional_id="
            )
        transactional_id = self.transactional_id
        identity = call_with_retry(
            self.retry,
            lambda: self._broker.init_producer(transactional_id, self.transaction_timeout_ms),
            "init_producer",
        )
        with self._lock:
            self._identity = identity
            self._phase = TxnPhase.READY
        return identity

    def begin_transaction(self) -> int:
        """Start a transaction; return its id. Sends then belong to it until commit/abort."""
        identity = self._require_transactional("begin_transaction()")
        if self._phase is not TxnPhase.READY:
            raise InvalidTxnStateError(
                f"begin_transaction() while {self._phase.value}: commit or abort "
                f"transaction {self._transaction_id} first"
            )
        request_id = next(self._request_ids)
        try:
            transaction_id = call_with_retry(
                self.retry,
                lambda: self._broker.begin_transaction(
                    identity.producer_id, identity.producer_generation, request_id
                ),
                "begin_transaction",
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None
        with self._lock:
            self._transaction_id = transaction_id
            self._next_sequence.clear()  # transactional sequences restart per transaction
            self._phase = TxnPhase.IN_TRANSACTION
        return transaction_id

    @property
    def transaction_id(self) -> int | None:
        """Id of the open transaction, or None."""
        return self._transaction_id if self._transaction_id != NO_TRANSACTION_ID else None

    def send_offsets_to_transaction(
        self, offsets: Mapping[Any, int] | Iterable[tuple[Any, int]], group_id: str
    ) -> None:
        """Commit ``group_id``'s consumed offsets with this transaction (consume-process-produce)."""
        identity = self._require_transactional("send_offsets_to_transaction()")
        if self._phase is not TxnPhase.IN_TRANSACTION:
            raise InvalidTxnStateError(
                f"send_offsets_to_transaction() while {self._phase.value}; begin a transaction"
            )
        as_offsets = _as_offsets(offsets)
        transaction_id = self._transaction_id
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.send_offsets_to_transaction(
                    transaction_id,
                    identity.producer_id,
                    identity.producer_generation,
                    group_id,
                    as_offsets,
                ),
                "send_offsets_to_transaction",
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None

    def commit_transaction(self, wait_for_applied: bool = False) -> None:
        """Flush, then commit. Returns once the commit is durable (guaranteed to be applied);
        with ``wait_for_applied``, once its records are readable.

        If a send of this transaction failed, raises that error: call abort_transaction().
        """
        identity = self._require_transactional("commit_transaction()")
        if self._phase not in (TxnPhase.IN_TRANSACTION, TxnPhase.ABORTABLE):
            raise InvalidTxnStateError(
                f"commit_transaction() while {self._phase.value}; begin a transaction first"
            )
        self.flush()
        with self._lock:
            if self._phase is TxnPhase.ABORTABLE or self._phase is TxnPhase.FATAL:
                assert self._failure is not None
                raise self._failure
        transaction_id = self._transaction_id
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.commit_transaction(
                    transaction_id,
                    identity.producer_id,
                    identity.producer_generation,
                    wait_for_applied,
                ),
                "commit_transaction",
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None
        self._end_transaction()

    def abort_transaction(self) -> None:
        """Drop queued records, let in-flight sends finish, abort. Nothing of it is ever read."""
        identity = self._require_transactional("abort_transaction()")
        if self._phase not in (TxnPhase.IN_TRANSACTION, TxnPhase.ABORTABLE):
            raise InvalidTxnStateError(
                f"abort_transaction() while {self._phase.value}; there is no transaction to abort"
            )
        aborted = InvalidTxnStateError(
            f"transaction {self._transaction_id} was aborted before this record was sent"
        )
        with self._changed:
            unsent = self._accumulator.take_unsent()
            for batch in unsent:
                self._accumulator.release(batch)
            self._changed.notify_all()
        self._fail_batches(unsent, aborted)
        self.flush()  # wait for the batches in flight
        transaction_id = self._transaction_id
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.abort_transaction(
                    transaction_id, identity.producer_id, identity.producer_generation
                ),
                "abort_transaction",
            )
        except TwinlogError as error:
            raise self._fenced_guard(error) from None
        self._end_transaction()

    def _end_transaction(self) -> None:
        with self._lock:
            self._transaction_id = NO_TRANSACTION_ID
            self._phase = TxnPhase.READY
            self._failure = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Producer]:
        """Begin; commit when the block ends. Abort (then re-raise) if the block raises, or if
        the commit finds a failed send of this transaction."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            self._abort_after_failure()
            raise
        try:
            self.commit_transaction()
        except TwinlogError:
            if self._phase is TxnPhase.ABORTABLE:
                self._abort_after_failure()
            raise

    def _abort_after_failure(self) -> None:
        if self._phase in (TxnPhase.IN_TRANSACTION, TxnPhase.ABORTABLE):
            try:
                self.abort_transaction()
            except TwinlogError:
                log.exception("abort after a failed transaction failed too")
