"""A producer's sender thread: ready batches out, answers in (Kafka's Sender).

The thread drains the accumulator's ready batches (at most one in flight per
partition), builds each on its first attempt (producer id, generation, base
sequence), sends it over the produce pipe and, on the answer, resolves the
batch's future, puts it back for a retry (retriable error, time left), or fails
it and tells the transaction manager what that means for the producer.

Thread rule: ``flush``, ``close``, ``drop_unsent`` and ``restart_sequences`` are
called from the producer's methods; the rest runs on the sender thread or, for
answers, on the client's I/O thread. Shared state (the accumulator, the
transaction manager, the sequences) is touched only with the producer's lock held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from twinlog.engine.base.errors import (
    DuplicateSequenceError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RequestTimedOutError,
    TwinlogError,
    UnknownProducerIdError,
)
from twinlog.engine.base.types import ProduceResult, ProducerIdentity, TopicPartition
from twinlog.rpc.client.accumulator import Accumulator, ProducerBatch
from twinlog.rpc.client.client_metrics import ProducerMetrics
from twinlog.rpc.client.produce_stream import ProducePipe, open_pipe
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.sequences import SequenceNumbers
from twinlog.rpc.client.transaction_manager import TransactionManager
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.client")

# An error that leaves a batch's fate unknown: the idempotent producer starts afresh
# (new producer id) rather than risk a later batch being taken for a duplicate.
SEQUENCE_BREAKING_ERRORS = (OutOfOrderSequenceError, UnknownProducerIdError, RequestTimedOutError)


class Sender:
    def __init__(
        self,
        broker: BrokerApi,
        accumulator: Accumulator,
        transactions: TransactionManager,
        changed: threading.Condition,
        retry: RetryPolicy,
        on_batch_closed: Callable[[TopicPartition], None],
        metrics: ProducerMetrics | None = None,
    ) -> None:
        """``changed`` is the producer's lock, notified whenever the buffer or the batches
        in flight change; ``on_batch_closed`` is told (lock held) of each batch sent."""
        self.retry = retry
        self.closing = False
        self._broker = broker
        self._accumulator = accumulator
        self._transactions = transactions
        self._changed = changed
        self._on_batch_closed = on_batch_closed
        self._in_flight: set[TopicPartition] = set()
        self._sequences = SequenceNumbers()
        self._flushing = 0  # flush() calls waiting: lingering batches go at once
        self._pipe: ProducePipe = open_pipe(broker)
        if metrics is not None:  # times each request, counts its bytes
            self._pipe = metrics.measure(self._pipe)
        self._thread = threading.Thread(target=self._run, name="twinlog-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # --- called by the producer --------------------------------------------------------

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
        """Stop the thread (failing what is still queued) and close the produce pipe."""
        with self._changed:
            self.closing = True
            self._changed.notify_all()
        self._thread.join(timeout=None if timeout_ms is None else timeout_ms / 1000)
        self._pipe.close()

    def drop_unsent(self, error: TwinlogError) -> None:
        """Fail every queued batch with ``error``; batches in flight go on."""
        with self._changed:
            unsent = self._take_unsent()
            self._changed.notify_all()
        fail_batches(unsent, error)

    def restart_sequences(self) -> None:
        """Lock held. Transactional sequences restart with each transaction."""
        self._sequences.restart()

    # --- the thread ----------------------------------------------------------------------

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
            while not self.closing:
                now_s = time.monotonic()
                batches, wake_s = self._accumulator.drain(
                    now_s, self._in_flight, self._flushing > 0
                )
                if batches:
                    for batch in batches:
                        self._on_batch_closed(batch.topic_partition)
                    self._in_flight.update(batch.topic_partition for batch in batches)
                    return batches
                self._changed.wait(None if wake_s is None else max(0.0, wake_s - now_s))
            unsent = self._take_unsent()
        fail_batches(
            unsent, InvalidTxnStateError("the producer was closed before this record was sent")
        )
        return None

    def _ensure_identity(self) -> ProducerIdentity:
        with self._changed:
            identity = self._transactions.identity
        if identity is None:  # an idempotent producer gets its id on first use
            identity = call_with_retry(
                self.retry, lambda: self._broker.init_producer(None), "init_producer"
            )
            with self._changed:
                self._transactions.identity = identity
        return identity

    def _send(self, batch: ProducerBatch) -> None:
        try:
            if batch.payload is None:
                identity = self._ensure_identity()
                with self._changed:
                    batch.base_sequence = self._sequences.take(
                        batch.topic_partition, batch.record_count
                    )
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

    # --- answers (the client's I/O thread) -----------------------------------------------

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
            if error is not None and error.retriable and self._transactions.can_retry_sends():
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
            fail_batches([batch, *also_failed], error)
        else:
            assert result is not None
            complete(batch, result)

    def _record_failure(self, batch: ProducerBatch, error: TwinlogError) -> list[ProducerBatch]:
        """A batch failed for good: what that means for the producer. Lock held.

        Returns other queued batches that fail with it (the caller fails them unlocked).
        """
        if isinstance(error, ProducerFencedError):
            self._transactions.fenced(error)
            return self._take_unsent()
        if self._transactions.is_transactional:
            self._transactions.send_failed(error)
            return []
        if isinstance(error, SEQUENCE_BREAKING_ERRORS) or error.retriable:
            # Unknown whether the broker has it: start a new idempotent producer id.
            log.warning("producer sequence broken by %s; taking a new producer id", error)
            self._transactions.forget_identity()
            self._sequences.restart()
            built = self._accumulator.take_built()
            for item in built:
                self._accumulator.release(item)
            return built
        # Definitely not written (refused before writing): its sequences can be reused.
        self._sequences.give_back(batch.topic_partition, batch.base_sequence, batch.record_count)
        return []

    def _take_unsent(self) -> list[ProducerBatch]:
        """Lock held. Remove every queued batch and free its bytes; the caller fails them."""
        unsent = self._accumulator.take_unsent()
        for batch in unsent:
            self._accumulator.release(batch)
        return unsent


def fail_batches(batches: Iterable[ProducerBatch], error: BaseException) -> None:
    for batch in batches:
        if not batch.result.done():
            batch.result.set_exception(error)


def complete(batch: ProducerBatch, result: ProduceResult) -> None:
    if not batch.result.done():
        batch.result.set_result(result.base_offset)
