"""The completion worker: it carries out a coordinator's decisions on the partitions.

    PREPARE_COMMIT -> APPLY_COMMIT on every partition (``PartitionLeaders``) -> COMMITTED
    PREPARE_ABORT  -> APPLY_ABORT on every partition                         -> ABORTED

Partitions are reached only through ``partition_calls.PartitionLeaders``; each
call carries the coordinator's epochs (``EpochsFor``).

The APPLY calls of one transaction run in parallel, one per partition (each
partition's copier fsyncs its own data log, so the fsyncs overlap); COMMITTED or
ABORTED is journaled only after every one of them returned. One worker thread per
coordinator completes the queued transactions one after another, so per partition
the copies land in commit order; a transaction waiting to be retried holds back the later
ones of its producer (they may be queued behind it: a producer begins its next
transaction once the previous one is prepared). A decision is durable before it is
queued, so a completion cut short by a crash is queued again by recovery; APPLY is
idempotent.

Thread rule: the worker shares the coordinator's lock (its queue and the states it
waits on are the coordinator's); APPLY calls run without it.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

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
APPLY_THREADS = 8  # partitions of one transaction applied at once (each mostly waits on fsync)


CompletionHook = Callable[[TransactionMetadata], None]
TransactionLookup = Callable[[int], TransactionMetadata | None]
JournalWrite = Callable[[CoordinatorRecord], int]  # append (fsynced), then apply to memory
EpochsFor = Callable[[TopicPartition], CallEpochs]  # the epochs a call to a partition carries


def retry_delay_s(failures: int, retriable: bool) -> float:
    """How long a completion that failed ``failures`` times in a row waits before the next
    try: ``RETRIABLE_BACKOFF`` after a retriable error, else ``COMPLETION_BACKOFF``."""
    return (RETRIABLE_BACKOFF if retriable else COMPLETION_BACKOFF).delay_s(failures)


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
        self._epochs_for = epochs_for
        self._on_complete = on_complete
        self._queue: list[int] = []
        self._ready = threading.Condition(lock)  # the queue grew, or the worker must stop
        self._completed = threading.Condition(lock)  # a transaction became COMMITTED/ABORTED
        self._closed = False
        self._thread: threading.Thread | None = None
        # APPLY fan-out: a transaction's partitions are applied in parallel (recovery
        # uses it too, before start()). Threads are made on first use.
        self._apply_pool = ThreadPoolExecutor(
            max_workers=APPLY_THREADS, thread_name_prefix=f"txn-apply-{partition_index}"
        )

    def queue(self, transaction_id: int) -> None:
        """Complete this prepared transaction, after those queued before it."""
        with self._lock:
            self._queue.append(transaction_id)
            self._ready.notify()

    def start(self) -> None:
        """Start the worker thread (after recovery)."""
        self._thread = threading.Thread(
            target=self._complete_forever, name=f"txn-completer-{self.partition_index}", daemon=True
        )
        self._thread.start()

    def _complete_forever(self) -> None:
        """Complete queued decisions in order; one that fails waits and is retried later.

        The decision is durable, so a failed completion (a full disk, a damaged
        journal) is retried, with a delay that doubles per failure up to
        ``COMPLETION_RETRY_S_MAX`` (``RETRIABLE_RETRY_S_MAX`` for a retriable error: a
        leader moving; ``retry_delay_s``); meanwhile the transactions queued behind it
        go ahead: one stuck partition must not hold up every other commit.
        """
        retry_at_s: dict[int, float] = {}  # transaction id -> when it may be tried again
        failures: dict[int, int] = {}
        while True:
            with self._lock:
                transaction_id = self._next_to_complete(retry_at_s)
                if transaction_id is None:
                    return  # closed
                txn = self._transaction_of(transaction_id)
                if txn is None:
                    self._queue.remove(transaction_id)
                    continue
            try:
                self.complete(txn)
            except Exception as error:
                if self._closed:
                    return  # shutting down: recovery at the next start redoes it
                failed = failures[transaction_id] = failures.get(transaction_id, 0) + 1
                retriable = isinstance(error, TwinlogError) and error.retriable
                delay_s = retry_delay_s(failed, retriable)
                retry_at_s[transaction_id] = time.monotonic() + delay_s
                if retriable:
                    if failed & (failed - 1):
                        continue  # said at the 1st, 2nd, 4th, 8th... failure: not every second
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
                    log.exception(
                        "completing transaction %d failed (%d times); retrying in %.2f s",
                        transaction_id,
                        failed,
                        delay_s,
                    )
                continue
            retry_at_s.pop(transaction_id, None)
            failures.pop(transaction_id, None)
            with self._lock:
                if transaction_id in self._queue:
                    self._queue.remove(transaction_id)

    def _next_to_complete(self, retry_at_s: dict[int, float]) -> int | None:
        """The first queued transaction not waiting for a retry and not queued behind one
        of its producer's that is (a producer's transactions complete in commit order);
        None once closed. Lock held."""
        while not self._closed:
            now_s = time.monotonic()
            waits_s = [retry_at_s.get(t, 0.0) - now_s for t in self._queue]
            held: set[int] = set()  # producers whose earliest queued transaction waits
            for transaction_id, wait_s in zip(self._queue, waits_s, strict=True):
                txn = self._transaction_of(transaction_id)
                producer_id = txn.producer_id if txn is not None else -1
                if producer_id in held:
                    continue
                if wait_s <= 0:
                    return transaction_id
                held.add(producer_id)
            # Only retries can be due later (a held transaction waits for its producer's).
            self._ready.wait(min((w for w in waits_s if w > 0), default=None))
        return None

    def complete(self, txn: TransactionMetadata) -> None:
        """APPLY the prepared decision to every partition, then journal its completion."""
        if txn.state.is_complete:
            return  # completed by another caller (the worker, or recovery) meanwhile
        committing = txn.state is TransactionState.PREPARE_COMMIT
        assert committing or txn.state is TransactionState.PREPARE_ABORT, txn.state
        self._apply_everywhere(txn, committing)
        failpoints.hit("coordinator.after_apply")
        if self._on_complete is not None:
            self._on_complete(txn)
        with self._lock:
            event = (
                TransactionEvent.COMPLETE_COMMIT if committing else TransactionEvent.COMPLETE_ABORT
            )
            if next_state(txn.transaction_id, txn.state, event) is Outcome.NO_OP:
                return
            done = Committed if committing else Aborted
            self._write(done(now_ms(), txn.transaction_id))
            self._completed.notify_all()

    def _apply_everywhere(self, txn: TransactionMetadata, committing: bool) -> None:
        """APPLY on every partition of ``txn``, in parallel; raise the first failure.

        Every call has finished when this returns or raises, so a retry never runs
        beside a call still in progress on the same partition.
        """

        journaled = dict(txn.journaled)

        def apply(topic_partition: TopicPartition) -> None:
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

        # This thread applies the first partition itself while the pool applies the rest.
        run_side_by_side(
            self._apply_pool,
            [
                functools.partial(apply, topic_partition)
                for topic_partition in sorted(txn.partitions)
            ],
        )

    def wait_complete(self, txn: TransactionMetadata, timeout_s: float) -> bool:
        """Wait until ``txn`` is COMMITTED or ABORTED; False if ``timeout_s`` passed first."""
        with self._lock:
            return self._completed.wait_for(lambda: txn.state.is_complete, timeout_s)

    def abandon(self) -> None:
        """Stop as a crash would: no completion is finished."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()
        self._apply_pool.shutdown(wait=False)

    def close(self) -> None:
        """Stop after the completion in progress; what is still queued is redone by recovery."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._apply_pool.shutdown(wait=True)
