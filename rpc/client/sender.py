"""A producer's sender thread: ready batches out, answers in (Kafka's Sender).

The thread drains the accumulator's ready batches (at most one in flight per
partition), builds each on its first attempt (producer id, generation, base
sequence), sends it over the produce pipe and, on the answer, resolves the
batch's future, puts it back for a retry (retriable error, time left), or fails
it and tells the transaction manager what that means for the producer.

No record waits past its delivery deadline (``delivery_timeout_ms`` after its batch
was created): the thread also wakes at the earliest deadline and fails, with
RequestTimedOutError (``expiry``), batches still queued and batches whose request is
unanswered. An expired batch in flight keeps its partition busy until its request
ends (the pipe's own request deadline bounds that), so no later batch overtakes it.

Thread rule: ``flush``, ``close``, ``drop_unsent`` and ``restart_sequences`` are
called from the producer's methods; the rest runs on the sender thread or, for
answers, on the client's I/O thread. Shared state (the accumulator, the
transaction manager, the sequences) is touched only with the producer's lock held.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError

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
from twinlog.engine.records.batch_format import NO_TRANSACTION_ID
from twinlog.rpc.client.accumulator import Accumulator, ProducerBatch
from twinlog.rpc.client.call_deadline import NO_ANSWER_ERRORS
from twinlog.rpc.client.client_metrics import ProducerMetrics
from twinlog.rpc.client.coordinator_placement import CoordinatorPlacement
from twinlog.rpc.client.expiry import deadline_error
from twinlog.rpc.client.produce_stream import BatchToSend, ProducePipe, open_pipe
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.sequences import SequenceNumbers
from twinlog.rpc.client.transaction_manager import TransactionManager
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.client")

# An error that leaves a batch's fate unknown: the idempotent producer starts afresh
# (new producer id) rather than risk a later batch being taken for a duplicate.
SEQUENCE_BREAKING_ERRORS = (OutOfOrderSequenceError, UnknownProducerIdError, RequestTimedOutError)
# flush() with no timeout waits for every record's delivery deadline; past the latest one
# by this much, something is wrong (a pipe that never answers): it raises instead.
FLUSH_SLACK_S = 5.0

Failures = list[tuple[list[ProducerBatch], TwinlogError]]


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
        self._in_flight: dict[TopicPartition, ProducerBatch] = {}
        self._sequences = SequenceNumbers()
        self._flushing = 0  # flush() calls waiting: lingering batches go at once
        self._telling = 0  # answered batches whose futures are being told (flush waits)
        # (transaction id, its partitions added by _declare_partitions): sender thread only
        self._declared: tuple[int, set[TopicPartition]] = (NO_TRANSACTION_ID, set())
        # Whether a flush's partitions need adding first (None: always; the broker does
        # not change, so it is asked once whether it can tell)
        self._placement = broker if isinstance(broker, CoordinatorPlacement) else None
        self._pipe: ProducePipe = open_pipe(broker)
        if metrics is not None:  # times each request, counts its bytes
            self._pipe = metrics.measure(self._pipe)
        self._thread = threading.Thread(target=self._run, name="twinlog-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # --- called by the producer --------------------------------------------------------

    def flush(self, timeout_ms: int | None = None, what: str = "flush()") -> None:
        """Send everything queued and wait for the answers (their errors are in the futures).

        ``timeout_ms`` None: until every record is done, which its delivery deadline bounds.
        Raises RequestTimedOutError, naming ``what``, when time runs out first.
        """
        started_s = time.monotonic()
        deadline_s = None if timeout_ms is None else started_s + timeout_ms / 1000
        with self._changed:
            self._flushing += 1
            self._changed.notify_all()
            try:
                while not self._all_done():
                    now_s = time.monotonic()
                    limit_s = deadline_s
                    if limit_s is None:
                        limit_s = self._latest_deadline_s(now_s) + FLUSH_SLACK_S
                    if now_s >= limit_s:
                        raise RequestTimedOutError(
                            f"{what} did not complete within "
                            f"{(now_s - started_s) * 1000:.0f} ms"
                            + (f" (timeout_ms={timeout_ms})" if timeout_ms is not None else "")
                            + ": records are still queued or unanswered; the server is stalled "
                            "or unreachable. Their futures fail by their delivery deadline; "
                            "call it again to wait longer"
                        )
                    self._changed.wait(limit_s - now_s)
            finally:
                self._flushing -= 1

    def _all_done(self) -> bool:
        """Lock held. Nothing queued, every batch sent has its outcome (an expired batch
        has one, though its request may still be under way), and every answered batch's
        futures are told."""
        return (
            self._accumulator.is_empty()
            and self._telling == 0
            and all(batch.result.done() for batch in self._in_flight.values())
        )

    def _latest_deadline_s(self, now_s: float) -> float:
        """Lock held. The last delivery deadline of a batch not done yet."""
        pending = [batch for batch in self._in_flight.values() if not batch.result.done()]
        pending.extend(self._accumulator)
        return max((batch.deadline_s for batch in pending), default=now_s)

    def close(self, timeout_ms: int | None = None) -> None:
        """Stop the thread (failing what is still queued), close the produce pipe, and fail
        whatever is still without an answer then."""
        started_s = time.monotonic()
        with self._changed:
            self.closing = True
            self._changed.notify_all()
        self._thread.join(timeout=None if timeout_ms is None else timeout_ms / 1000)
        remaining_s = None
        if timeout_ms is not None:
            remaining_s = max(0.0, started_s + timeout_ms / 1000 - time.monotonic())
        with self._changed:
            if all(batch.result.done() for batch in self._in_flight.values()):
                # Every record has its outcome (expired ones included): no answer is worth
                # waiting for from a server that may be stalled.
                remaining_s = 0.0
        self._pipe.close(remaining_s)
        with self._changed:
            unanswered = [batch for batch in self._in_flight.values() if not batch.result.done()]
            unanswered.extend(self._take_unsent())
            for batch in unanswered:
                self._accumulator.release(batch)
            self._changed.notify_all()
        fail_batches(
            unanswered,
            InvalidTxnStateError(
                "the producer was closed before this record was acknowledged; it may or may "
                "not have been written"
            ),
        )

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
            work = self._next_work()
            if work is None:
                return
            batches, expired = work
            for failed, error in expired:
                fail_batches(failed, error)
            self._declare_partitions(batches)
            self._send(batches)

    def _declare_partitions(self, batches: list[ProducerBatch]) -> None:
        """Add the partitions of a transaction's first batches to it in one request (one
        ADD_PARTITIONS record, one journal sync) before their produces, as Kafka's
        producer does, unless the coordinator leads them all (``coordinator_placement``:
        there each first batch adds its partition at no call's cost). Otherwise each
        partition's leader adds its partition at the coordinator: a call and a write each.
        An optimization only: on failure the produces register their partitions, and raise
        any error that matters."""
        added = self._declared
        new: dict[int, set[TopicPartition]] = {}
        for batch in batches:
            transaction_id = batch.transaction_id
            if transaction_id == NO_TRANSACTION_ID or batch.attempts:
                continue
            if transaction_id != added[0]:
                added = self._declared = (transaction_id, set())
            if batch.topic_partition not in added[1]:
                new.setdefault(transaction_id, set()).add(batch.topic_partition)
        if len(new.get(added[0], ())) < 2:  # a single partition adds itself as cheaply
            return
        with self._changed:
            identity = self._transactions.identity
        if identity is None:
            return
        partitions = sorted(new[added[0]])
        if self._placement is not None and self._placement.coordinator_leads(
            identity.producer_id, partitions
        ):
            added[1].update(partitions)  # each registers itself with its first batch
            return
        try:
            self._broker.add_partitions_to_transaction(
                added[0], identity.producer_id, identity.producer_generation, partitions
            )
        except TwinlogError as error:
            log.debug(
                "adding %d partitions to transaction %d: %s", len(partitions), added[0], error
            )
            return
        added[1].update(partitions)

    def _next_work(self) -> tuple[list[ProducerBatch], Failures] | None:
        """Wait for ready batches (marking their partitions in flight) or expired ones;
        None once closing."""
        with self._changed:
            while not self.closing:
                now_s = time.monotonic()
                expired = self._expire(now_s)
                batches, wake_s = self._accumulator.drain(
                    now_s, self._in_flight, self._flushing > 0
                )
                for batch in batches:
                    self._on_batch_closed(batch.topic_partition)
                    self._in_flight[batch.topic_partition] = batch
                if batches or expired:
                    self._changed.notify_all()
                    return batches, expired
                deadline_s = self._earliest_deadline_s()
                if deadline_s is not None and (wake_s is None or deadline_s < wake_s):
                    wake_s = deadline_s
                self._changed.wait(None if wake_s is None else max(0.0, wake_s - now_s))
            unsent = self._take_unsent()
        fail_batches(
            unsent, InvalidTxnStateError("the producer was closed before this record was sent")
        )
        return None

    def _earliest_deadline_s(self) -> float | None:
        """Lock held. When the next batch expires: queued, or in flight and unanswered."""
        deadlines = [
            batch.deadline_s
            for batch in self._in_flight.values()
            if not (batch.expired or batch.result.done())
        ]
        queued_s = self._accumulator.earliest_deadline_s()
        if queued_s is not None:
            deadlines.append(queued_s)
        return min(deadlines, default=None)

    def _expire(self, now_s: float) -> Failures:
        """Lock held. Take the batches past their delivery deadline; the caller fails them
        (with what fails along: see ``_record_failure``)."""
        failures: Failures = []
        for batch in self._in_flight.values():
            if batch.expired or batch.deadline_s > now_s or batch.result.done():
                continue
            batch.expired = True  # its partition stays busy until the request ends
            self._accumulator.release(batch)
            error = deadline_error(batch, now_s, sent=True)
            failures.append(([batch, *self._record_failure(batch, error)], error))
        for batch in self._accumulator.take_expired(now_s):
            self._accumulator.release(batch)
            sent = batch.payload is not None  # built on its first attempt: sent before
            error = deadline_error(batch, now_s, sent=sent)
            if sent:
                failures.append(([batch, *self._record_failure(batch, error)], error))
            else:
                if self._transactions.is_transactional:  # the transaction lacks its records
                    self._transactions.send_failed(error)
                failures.append(([batch], error))  # no sequence taken: nothing else breaks
        if failures:  # INFO: each error reaches its records' futures, where callers see it
            log.info(
                "%d batch(es) expired at their delivery deadline: %s",
                len(failures),
                failures[0][1],
            )
        return failures

    def _ensure_identity(self, batch: ProducerBatch) -> ProducerIdentity:
        with self._changed:
            identity = self._transactions.identity
        if identity is None:  # an idempotent producer gets its id on first use
            remaining_ms = max(1, round((batch.deadline_s - time.monotonic()) * 1000))
            identity = call_with_retry(
                self.retry,
                lambda: self._broker.init_producer(None),
                "init_producer",
                timeout_ms=remaining_ms,  # within the batch's delivery deadline
            )
            with self._changed:
                self._transactions.identity = identity
        return identity

    def _send(self, batches: list[ProducerBatch]) -> None:
        """The ready batches in one ``submit_all``: the pipe sends those of one broker in
        one request. A batch whose bytes cannot be built fails alone."""
        ready: list[ProducerBatch] = []
        to_send: list[BatchToSend] = []
        for batch in batches:
            try:
                payload = self._build(batch)
            except Exception as error:
                failed: Future[ProduceResult] = Future()
                failed.set_exception(error)
                self._on_done(batch, failed)
                continue
            ready.append(batch)
            to_send.append(BatchToSend(*batch.topic_partition, payload, batch.transaction_id))
        try:
            futures = self._pipe.submit_all(to_send)
        except Exception as error:
            futures = []
            for _ in ready:
                failed = Future()
                failed.set_exception(error)
                futures.append(failed)
        for batch, future in zip(ready, futures, strict=True):
            future.add_done_callback(functools.partial(self._on_done, batch))

    def _build(self, batch: ProducerBatch) -> bytes:
        """The batch's bytes, built on its first attempt: stamped with the producer's
        identity and its sequence (a retry sends the same bytes)."""
        if batch.payload is not None:
            return batch.payload
        identity = self._ensure_identity(batch)
        with self._changed:
            batch.base_sequence = self._sequences.take(batch.topic_partition, batch.record_count)
        builder = batch.builder
        builder.producer_id = identity.producer_id
        builder.producer_generation = identity.producer_generation
        builder.base_sequence = batch.base_sequence
        batch.payload = builder.build()
        return batch.payload

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
            if self._in_flight.get(batch.topic_partition) is batch:
                del self._in_flight[batch.topic_partition]
            # Expired (its futures fail once _run has the lock released: ``expired`` marks it
            # at once), or failed by close(), while unanswered: its outcome is already told.
            if batch.expired or batch.result.done():
                self._accumulator.release(batch)
                self._changed.notify_all()
                log.debug(
                    "the request of %s ended after its batch had failed: %s",
                    batch.topic_partition,
                    "written" if error is None else error,
                )
                return
            now_s = time.monotonic()
            if (
                error is not None
                and error.retriable
                and self._transactions.can_retry_sends()
                and not self.closing
            ):
                pause_s = self.retry.pause_ms(batch.attempts + 1) / 1000
                if now_s + pause_s < batch.deadline_s:
                    batch.attempts += 1
                    batch.retry_at_s = now_s + pause_s
                    batch.last_error = error
                    log.debug("retrying %s: %s", batch.topic_partition, error)
                    self._accumulator.requeue(batch)
                    self._changed.notify_all()
                    return
                if isinstance(error, NO_ANSWER_ERRORS) and now_s < batch.deadline_s:
                    # No time for another attempt, but no answer either: it expires at its
                    # deadline (``_expire``), not earlier, as delivery_timeout_ms promises.
                    batch.attempts += 1
                    batch.retry_at_s = batch.deadline_s
                    batch.last_error = error
                    self._accumulator.requeue(batch)
                    self._changed.notify_all()
                    return
                error = deadline_error(batch, now_s, sent=True, last_error=error)
            self._accumulator.release(batch)
            also_failed: list[ProducerBatch] = []
            if error is not None:
                also_failed = self._record_failure(batch, error)
            elif batch.transaction_id != NO_TRANSACTION_ID:
                self._transactions.batch_written(batch.transaction_id, batch.topic_partition)
            # Out of flight, its futures not told yet (they run callbacks: not under the
            # lock): flush() waits for this too, or it could return before they are done.
            self._telling += 1
        try:
            if error is not None:
                fail_batches([batch, *also_failed], error)
            else:
                assert result is not None
                complete(batch, result)
        finally:
            with self._changed:
                self._telling -= 1
                self._changed.notify_all()

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
            # INFO: the error itself reaches the batch's futures
            log.info("producer sequence broken by %s; taking a new producer id", error)
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
        # Threads race here (the sender's expiry, the I/O thread's answer, close()): the
        # first outcome stays.
        try:
            batch.result.set_exception(error)
        except InvalidStateError:
            pass


def complete(batch: ProducerBatch, result: ProduceResult) -> None:
    try:
        batch.result.set_result(result.base_offset)
    except InvalidStateError:
        pass
