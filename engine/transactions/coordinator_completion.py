"""The completion worker: it carries out a coordinator's decisions on the partitions.

    PREPARE_COMMIT -> APPLY_COMMIT on every partition (``PartitionLeaders``) -> COMMITTED
    PREPARE_ABORT  -> APPLY_ABORT on every partition                         -> ABORTED

Partitions are reached only through ``partition_calls.PartitionLeaders``; each
call carries the coordinator's epochs (``EpochsFor``).

A pipeline: up to ``COMPLETIONS_IN_FLIGHT_MAX`` queued transactions are completed at
once, each applied on all its partitions side by side (each partition's copier
fsyncs its own data log and waits for its replicas, so the waits overlap). Per
partition, one FIFO lane: a transaction's APPLY on a partition runs only after the
APPLY there of every transaction dispatched before it returned, so per partition the
copies start in commit order (but for a retried transaction: it comes after those
dispatched while it waited). COMMITTED or ABORTED is journaled only after every
partition applied the transaction; if one failed, the transaction is dispatched again
later on all its partitions (APPLY is idempotent), while the others go on. A
producer's transactions complete in order: one is not dispatched while an earlier one
of its producer is in flight or waits for a retry (they may be queued behind it: a
producer begins its next transaction once the previous one is prepared). A decision
is durable before it is queued, so a completion cut short by a crash is queued again
by recovery.

One worker thread per coordinator dispatches transactions and journals their ends
(and schedules their retries). The APPLY calls run on a pool, one task per call: a
lane hands its next call to the pool when one returns, so an idle lane holds no
thread, a busy one cannot keep a thread while other lanes wait for one, and no thread
waits for its turn in another lane (a bounded pool cannot deadlock).

Thread rule: the worker shares the coordinator's lock (its queue and the states it
waits on are the coordinator's; its lanes and in-flight table are guarded by it too);
APPLY calls run without it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from twinlog.engine.base import failpoints
from twinlog.engine.base.backoff import Backoff
from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.side_by_side import run_side_by_side
from twinlog.engine.base.types import TopicPartition, TransactionState
from twinlog.engine.transactions.partition_calls import (
    ApplyAbort,
    ApplyCommit,
    CallEpochs,
    PartitionLeaders,
    apply_commits,
)
from twinlog.engine.transactions.transaction_metadata import TransactionMetadata, now_ms
from twinlog.engine.transactions.txn_state import Outcome, TransactionEvent, next_state
from twinlog.journal.txn_records import Aborted, Committed, CoordinatorRecord

log = logging.getLogger(__name__)

# A failed completion is retried 10 ms later, the delay doubling per failure up to 30 s:
# a failing completion is retried at least this often. The one backoff policy, not
# jittered: one worker per coordinator.
COMPLETION_BACKOFF = Backoff(initial_ms=10, max_ms=30_000, jitter=0)
# ... and up to 1 s when its error is retriable (a leader moving, a broker away): a
# committed transaction becomes readable within about this long of its partitions being
# served again, not up to 30 s later. Such a retry is one call per partition, cheap.
RETRIABLE_BACKOFF = Backoff(initial_ms=10, max_ms=1_000, jitter=0)
COMPLETION_RETRY_S_MAX = COMPLETION_BACKOFF.max_ms / 1000
RETRIABLE_RETRY_S_MAX = RETRIABLE_BACKOFF.max_ms / 1000
# Transactions of one coordinator being completed at once (dispatched, not yet journaled
# complete): bounds the lanes' memory and the calls outstanding; the rest wait queued.
COMPLETIONS_IN_FLIGHT_MAX = 32
# APPLY calls of one coordinator running at once: one per busy lane (partition), across
# the transactions in flight, and those of a synchronous ``complete()``. Each mostly
# waits (an fsync, replication round trips), so more threads than cores pay; a busy lane
# beyond this waits for a thread in the pool's queue.
APPLY_THREADS = 16
# Commits queued in one lane copied as one group (one data-log fsync, one journal-log
# write per mark): enough to share the fsyncs among a busy partition's producers, few
# enough that one group's copy does not hold the lane long.
COPY_GROUP_MAX = 16
CLOSE_WAIT_S = 10  # how long close() lets the APPLYs in progress finish


CompletionHook = Callable[[TransactionMetadata], None]
TransactionLookup = Callable[[int], TransactionMetadata | None]
JournalWrite = Callable[[CoordinatorRecord], int]  # append, then apply to memory (lock held)
EpochsFor = Callable[[TopicPartition], CallEpochs]  # the epochs a call to a partition carries


def retry_delay_s(failures: int, retriable: bool) -> float:
    """How long a completion that failed ``failures`` times in a row waits before the next
    try: ``RETRIABLE_BACKOFF`` after a retriable error, else ``COMPLETION_BACKOFF``."""
    return (RETRIABLE_BACKOFF if retriable else COMPLETION_BACKOFF).delay_s(failures)


def _front_group(lane: deque[_Try]) -> list[_Try]:
    """The try at the front of a lane, with the commits right behind it if it commits
    (up to COPY_GROUP_MAX): they are copied as one group, in lane order."""
    group = [lane[0]]
    if lane[0].committing:
        for attempt in itertools.islice(lane, 1, COPY_GROUP_MAX):
            if not attempt.committing:
                break
            group.append(attempt)
    return group


@dataclass(eq=False)
class _Try:
    """One try at completing a transaction: its APPLY in the lane of each of its
    partitions. Guarded by the worker's lock."""

    txn: TransactionMetadata
    committing: bool
    journaled: dict[TopicPartition, int]  # what PREPARE_COMMIT counted, per partition
    unfinished: int  # partitions whose APPLY has not returned yet; 0: the try is over
    error: BaseException | None = None  # the first APPLY that failed, if any


class CompletionWorker:
    def __init__(
        self,
        partition_index: int,
        lock: threading.RLock,
        transaction_of: TransactionLookup,
        write: JournalWrite,
        applier: PartitionLeaders,
        epochs_for: EpochsFor,
        on_complete: CompletionHook | None = None,
    ) -> None:
        self.partition_index = partition_index
        self._lock = lock
        self._transaction_of = transaction_of
        self._write = write
        self._applier = applier
        # Leaders that take a copy group in one call (``CopyGroupLeaders``) get a lane's
        # queued commits together; others one at a time.
        self._copy_groups = callable(getattr(applier, "apply_commits", None))
        self._epochs_for = epochs_for
        self._on_complete = on_complete
        # Everything below is guarded by the lock.
        # Queued and not yet completed, in queue order; a transaction stays here while in
        # flight and while it waits for a retry.
        self._queue: list[int] = []
        # Dispatched and not yet settled (journaled, or scheduled for a retry); at most
        # COMPLETIONS_IN_FLIGHT_MAX. Each is in ``_finished`` or has ``unfinished`` lane
        # items (until a closed lane drops them).
        self._in_flight: dict[int, _Try] = {}
        # Partition -> the tries whose APPLY there waits or runs, in dispatch order; the
        # first runs. Only busy lanes are kept, and each has exactly one task on the pool.
        self._lanes: dict[TopicPartition, deque[_Try]] = {}
        self._finished: deque[_Try] = deque()  # tries over, for the worker thread to settle
        self._retry_at_s: dict[int, float] = {}  # transaction id -> when it may be tried again
        self._failures: dict[int, int] = {}  # transaction id -> failed tries in a row
        # Woken by: the queue grew, a try finished, a lane went idle while closed, close.
        self._ready = threading.Condition(lock)
        self._completed = threading.Condition(lock)  # a transaction became COMMITTED/ABORTED
        self._closed = False  # nothing more is dispatched; lanes take no new item
        self._stopped = False  # nothing more is journaled (abandon; close once it waited)
        self._thread: threading.Thread | None = None
        # The lanes' APPLY calls, and a synchronous complete()'s fan-out (recovery uses it
        # too, before start()). Threads are made on first use.
        self._apply_pool = ThreadPoolExecutor(
            max_workers=APPLY_THREADS, thread_name_prefix=f"txn-apply-{partition_index}"
        )

    def queue(self, transaction_id: int) -> None:
        """Complete this prepared transaction, after its producer's queued before it."""
        with self._lock:
            self._queue.append(transaction_id)
            self._ready.notify()

    def start(self) -> None:
        """Start the worker thread (after recovery)."""
        self._thread = threading.Thread(
            target=self._complete_forever, name=f"txn-completer-{self.partition_index}", daemon=True
        )
        self._thread.start()

    # --- the worker thread --------------------------------------------------------------

    def _complete_forever(self) -> None:
        """Dispatch queued decisions into the lanes; journal each whose APPLYs all succeeded,
        and schedule a retry for each where one failed.

        The decision is durable, so a failed completion (a full disk, a damaged
        journal) is retried, with a delay that doubles per failure up to
        ``COMPLETION_RETRY_S_MAX`` (``RETRIABLE_RETRY_S_MAX`` for a retriable error: a
        leader moving; ``retry_delay_s``); meanwhile the other transactions go ahead:
        one stuck partition must not hold up every other commit.
        """
        while True:
            with self._lock:
                finished = self._next_finished()
            if finished is None:
                return  # closed
            self._settle(finished)

    def _next_finished(self) -> _Try | None:
        """Dispatch what may start, then wait for a try to be over; None once closed and no
        APPLY is left running (or stopped). Lock held."""
        while not self._stopped:
            retry_in_s = None if self._closed else self._dispatch()
            if self._finished:  # a transaction without partitions is over once dispatched
                return self._finished.popleft()
            if self._closed and not self._lanes:
                return None
            # Woken by a try being over, a lane going idle once closed, or close() giving up.
            self._ready.wait(retry_in_s)
        return None

    def _dispatch(self) -> float | None:
        """Start every queued transaction that may start, up to COMPLETIONS_IN_FLIGHT_MAX:
        not in flight, no retry pending, and no earlier one of its producer in flight or
        waiting for a retry (a producer's transactions complete in commit order). Returns
        how long until a held-back retry is due (None: none is). Lock held."""
        now_s = time.monotonic()
        retry_in_s: float | None = None
        held: set[int] = set()  # producers with an earlier transaction in flight or waiting
        for transaction_id in list(self._queue):
            if len(self._in_flight) >= COMPLETIONS_IN_FLIGHT_MAX:
                return None  # a try being over wakes the worker (retries are later anyway)
            in_flight = self._in_flight.get(transaction_id)
            txn = in_flight.txn if in_flight is not None else self._transaction_of(transaction_id)
            if in_flight is None and (txn is None or txn.state.is_complete):
                self._forget(transaction_id)  # completed by another caller (recovery) meanwhile
                continue
            assert txn is not None
            if txn.producer_id in held:
                continue
            held.add(txn.producer_id)
            wait_s = self._retry_at_s.get(transaction_id, now_s) - now_s
            if in_flight is not None:
                continue
            if wait_s > 0:
                retry_in_s = wait_s if retry_in_s is None else min(retry_in_s, wait_s)
                continue
            self._start(txn)
        return retry_in_s

    def _start(self, txn: TransactionMetadata) -> None:
        """Append ``txn`` to the lane of each of its partitions, in one pass under the lock,
        so every lane orders the transactions alike. Lock held."""
        committing = txn.state is TransactionState.PREPARE_COMMIT
        assert committing or txn.state is TransactionState.PREPARE_ABORT, txn.state
        assert txn.transaction_id not in self._in_flight, txn.transaction_id
        attempt = _Try(txn, committing, dict(txn.journaled), unfinished=len(txn.partitions))
        self._in_flight[txn.transaction_id] = attempt
        if not txn.partitions:
            self._finished.append(attempt)  # nothing to apply: journal its end at once
        for topic_partition in sorted(txn.partitions):
            lane = self._lanes.get(topic_partition)
            if lane is None:
                lane = self._lanes[topic_partition] = deque()
                self._apply_pool.submit(self._run_lane, topic_partition)
            lane.append(attempt)

    def _run_lane(self, topic_partition: TopicPartition) -> None:
        """Run the APPLY at the front of ``topic_partition``'s lane (the commits queued
        behind a commit there join it as one copy group, up to COPY_GROUP_MAX), then hand
        the lane's next to the pool, or let the lane go idle. One group per task, not the
        whole lane: a lane that never empties would otherwise keep its thread while other
        lanes wait for one."""
        with self._lock:
            if self._closed:
                self._drop_lane(topic_partition)  # what was not started is redone by recovery
                return
            lane = self._lanes[topic_partition]
            group = _front_group(lane) if self._copy_groups else [lane[0]]
        errors = self._apply_group(group, topic_partition)
        with self._lock:
            lane = self._lanes[topic_partition]
            for attempt, error in zip(group, errors, strict=True):
                assert lane[0] is attempt and attempt.unfinished > 0
                lane.popleft()
                attempt.unfinished -= 1
                if attempt.error is None:
                    attempt.error = error
                if attempt.unfinished == 0:
                    self._finished.append(attempt)
                    self._ready.notify()
            if not lane or self._closed:
                self._drop_lane(topic_partition)
            else:
                self._apply_pool.submit(self._run_lane, topic_partition)  # not shut down: open

    def _apply_group(
        self, group: list[_Try], topic_partition: TopicPartition
    ) -> list[BaseException | None]:
        """APPLY each try of ``group`` on ``topic_partition``, in order (commits as one copy
        group); each one's error, or None. Without the lock."""
        if len(group) == 1:
            attempt = group[0]
            try:
                self._apply(attempt.txn, attempt.committing, attempt.journaled, topic_partition)
            except BaseException as failure:  # whatever it is, the lane must go on
                return [failure]
            return [None]
        epochs = self._epochs_for(topic_partition)
        try:
            errors = apply_commits(
                self._applier,
                [
                    ApplyCommit(
                        attempt.txn.transaction_id,
                        topic_partition,
                        attempt.txn.attempts,
                        attempt.journaled.get(topic_partition, 0),
                        epochs,
                    )
                    for attempt in group
                ],
            )
            for _attempt in group:
                failpoints.hit("coordinator.during_apply")
        except BaseException as failure:  # whatever it is, the lane must go on
            return [failure] * len(group)
        return errors

    def _drop_lane(self, topic_partition: TopicPartition) -> None:
        """The lane is idle (or closed): it holds no task any more. Lock held."""
        del self._lanes[topic_partition]
        if self._closed:
            self._ready.notify()  # close() waits for the APPLYs in progress

    def _settle(self, attempt: _Try) -> None:
        """Journal the end of a try whose APPLYs all succeeded; else schedule a retry."""
        txn = attempt.txn
        error = attempt.error
        if error is None:
            try:
                self._journal_end(txn, attempt.committing)
            except Exception as failure:
                error = failure
        transaction_id = txn.transaction_id
        with self._lock:
            del self._in_flight[transaction_id]
            if error is None:
                self._forget(transaction_id)
                return
            if self._closed:
                return  # shutting down: recovery at the next start redoes it
            failed = self._failures[transaction_id] = self._failures.get(transaction_id, 0) + 1
            retriable = isinstance(error, TwinlogError) and error.retriable
            delay_s = retry_delay_s(failed, retriable)
            self._retry_at_s[transaction_id] = time.monotonic() + delay_s
        if retriable:
            if failed & (failed - 1):
                return  # said at the 1st, 2nd, 4th, 8th... failure: not every second
            # A leader moving or a broker away: expected in a cluster, said in a line.
            log.warning(
                "completing transaction %d failed (%d times; %s: %s); retrying in %.2f s",
                transaction_id,
                failed,
                type(error).__name__,
                error,
                delay_s,
            )
        else:
            log.error(
                "completing transaction %d failed (%d times); retrying in %.2f s",
                transaction_id,
                failed,
                delay_s,
                exc_info=error,
            )

    def _forget(self, transaction_id: int) -> None:
        """``transaction_id`` is complete: off the queue (one entry) and the retry tables.
        Lock held."""
        if transaction_id in self._queue:
            self._queue.remove(transaction_id)
        self._retry_at_s.pop(transaction_id, None)
        self._failures.pop(transaction_id, None)

    # --- applying and journaling --------------------------------------------------------

    def complete(self, txn: TransactionMetadata) -> None:
        """APPLY the prepared decision to every partition, then journal its completion.

        For a caller that is not the worker (recovery, ``Coordinator.complete``); not with
        the lock held (the pool's threads may need it). Outside the lanes: no order with
        the worker's APPLYs."""
        if txn.state.is_complete:
            return  # completed by another caller (the worker, or recovery) meanwhile
        committing = txn.state is TransactionState.PREPARE_COMMIT
        assert committing or txn.state is TransactionState.PREPARE_ABORT, txn.state
        self._apply_everywhere(txn, committing)
        self._journal_end(txn, committing)

    def _journal_end(self, txn: TransactionMetadata, committing: bool) -> None:
        """Journal COMMITTED/ABORTED for ``txn``, applied on every partition, unless the
        state table says it is complete already or the worker stopped (as in a crash)."""
        failpoints.hit("coordinator.after_apply")
        if self._on_complete is not None:
            self._on_complete(txn)
        with self._lock:
            if self._stopped:
                return  # abandoned, or closed: nothing more is journaled; recovery redoes it
            event = (
                TransactionEvent.COMPLETE_COMMIT if committing else TransactionEvent.COMPLETE_ABORT
            )
            if next_state(txn.transaction_id, txn.state, event) is Outcome.NO_OP:
                return
            done = Committed if committing else Aborted
            self._write(done(now_ms(), txn.transaction_id))
            self._completed.notify_all()

    def _apply(
        self,
        txn: TransactionMetadata,
        committing: bool,
        journaled: dict[TopicPartition, int],
        topic_partition: TopicPartition,
    ) -> None:
        """APPLY the decision about ``txn`` on one partition. Without the lock."""
        epochs = self._epochs_for(topic_partition)
        if committing:
            self._applier.apply_commit(
                ApplyCommit(
                    txn.transaction_id,
                    topic_partition,
                    txn.attempts,
                    journaled.get(topic_partition, 0),
                    epochs,
                )
            )
        else:
            self._applier.apply_abort(ApplyAbort(txn.transaction_id, topic_partition, epochs))
        failpoints.hit("coordinator.during_apply")  # one partition applied, maybe not all

    def _apply_everywhere(self, txn: TransactionMetadata, committing: bool) -> None:
        """APPLY on every partition of ``txn``, in parallel; raise the first failure.

        Every call has finished when this returns or raises, so a retry never runs
        beside a call still in progress on the same partition.
        """
        journaled = dict(txn.journaled)
        # This thread applies the first partition itself while the pool applies the rest.
        run_side_by_side(
            self._apply_pool,
            [
                functools.partial(self._apply, txn, committing, journaled, topic_partition)
                for topic_partition in sorted(txn.partitions)
            ],
        )

    def wait_complete(self, txn: TransactionMetadata, timeout_s: float) -> bool:
        """Wait until ``txn`` is COMMITTED or ABORTED; False if ``timeout_s`` passed first."""
        with self._lock:
            return self._completed.wait_for(lambda: txn.state.is_complete, timeout_s)

    def abandon(self) -> None:
        """Stop as a crash would: no completion is finished, no lane takes another item."""
        with self._lock:
            self._closed = self._stopped = True
            self._ready.notify_all()
        self._apply_pool.shutdown(wait=False)

    def close(self) -> None:
        """Stop dispatching; let the APPLYs in progress finish (up to CLOSE_WAIT_S) and
        journal the transactions they complete. What is left is redone by recovery."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=CLOSE_WAIT_S)
        with self._lock:
            self._stopped = True  # an APPLY still stuck must not journal after close returns
            self._ready.notify_all()
            stuck = bool(self._lanes)  # an APPLY still running: do not wait for it
        self._apply_pool.shutdown(wait=not stuck)
