"""The transaction coordinator of one transaction-journal partition.

It owns the in-memory state of its producers and in-flight transactions and
the journal that makes that state durable. Every change follows one order,
as Kafka's TransactionMetadata: check the change against the state table
(``twinlog.engine.broker.txn_state``), append the record to the journal (fsynced), then
apply it to memory. So memory never runs ahead of the journal, and a restart
rebuilds exactly the acknowledged state by replay.

Commit path (double journaling, seed 001):

    commit():   PREPARE_COMMIT -> journal (fsync) -> answer the producer
    completer:  APPLY_COMMIT on every partition (``PartitionApplier``) -> COMMITTED -> journal

The APPLY calls of one transaction run in parallel, one per partition (each
partition's copier fsyncs its own data log, so the fsyncs overlap); COMMITTED
is written only after every one of them returned. Transactions of one
coordinator complete one after another, so per partition the copies land in
commit order.

From PREPARE_COMMIT on, the commit is guaranteed: a crash before COMMITTED is
redone by ``recover()``, and APPLY_COMMIT is idempotent. Abort is the same with
PREPARE_ABORT / APPLY_ABORT / ABORTED.

Fencing: ``init_producer`` bumps the generation of a transactional id; every
later request carrying an older generation gets ProducerFencedError, and the
old generation's open transaction is aborted.

Thread rule: every public method may be called from any thread. One lock
guards the coordinator's maps and the journal appends (a decision is
appended and applied atomically with respect to other decisions); each
transaction also has its own lock, which a produce holds from its state
check to the end of its journal append, so an abort can never slip between
the two (no entry can arrive after APPLY_ABORT ran: seed 003's problem).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Protocol

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    ConcurrentTransactionsError,
    InvalidConfigError,
    InvalidTxnStateError,
    PendingTransactionError,
    ProducerFencedError,
    TransactionDataMissingError,
    UnknownProducerIdError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import (
    ProducerIdentity,
    TopicPartition,
    TransactionDescription,
    TransactionState,
)
from twinlog.engine.broker.txn_state import Outcome, TransactionEvent, next_state
from twinlog.journal.txn_checkpoint import Checkpoint, ProducerSnapshot
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import (
    Aborted,
    AddOffsets,
    AddPartitions,
    Begin,
    Committed,
    CoordinatorRecord,
    InitProducer,
    PrepareAbort,
    PrepareCommit,
)

log = logging.getLogger(__name__)

# Ids carry their coordinator partition in their low bits, so any broker part can
# find the coordinator of a transaction or producer id without a lookup table.
PARTITION_BITS = 8
JOURNAL_PARTITIONS_MAX = 1 << PARTITION_BITS

TRANSACTION_TIMEOUT_MS_DEFAULT = 60_000
TRANSACTION_TIMEOUT_MS_MAX = 15 * 60_000
COMPLETION_RETRY_S_MAX = 30.0  # a failing completion is retried at least this often
COMPLETION_WAIT_MS = 5_000  # how long begin/init wait for the previous transaction to complete
APPLY_THREADS = 8  # partitions of one transaction applied at once (each mostly waits on fsync)
# Completed transactions remembered (id -> final state) so that a late request gets
# "it is ABORTED" rather than "unknown"; ~100 bytes each.
RECENT_OUTCOMES_MAX = 10_000


def coordinator_partition_of(identifier: int) -> int:
    """Journal partition that owns a producer id or transaction id."""
    return identifier & (JOURNAL_PARTITIONS_MAX - 1)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionApplier(Protocol):
    """How a coordinator reaches partitions: the seam between coordinator and partition leaders.

    Embedded, it calls the partition's copier; in a cluster it would be a network
    call to the partition's leader. Both calls must be idempotent.
    """

    def journaled_entries(self, partition: TopicPartition, transaction_id: int) -> int:
        """Entries the partition's local journal holds for the open transaction: 0 if none,
        -1 if the partition no longer exists (its topic was deleted)."""

    def apply_commit(
        self,
        partition: TopicPartition,
        transaction_id: int,
        attempts: tuple[str, ...] | None,
        journaled_entries: int,
    ) -> None:
        """Copy the transaction's entries (only those of ``attempts`` and untagged, if given).

        ``journaled_entries``: how many the journal held at the decision (0: not known);
        fewer now means the journal lost some, and the copy must refuse, not shrink.
        """

    def apply_abort(self, partition: TopicPartition, transaction_id: int) -> None:
        """Drop the transaction's entries."""


class IdSource(Protocol):
    def next(self, kind: str) -> int: ...


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
    transaction_id: int | None = None  # the producer's transaction that is not complete
    last_begin: tuple[int, int] = (-1, -1)  # (request id, transaction id) to answer a retried begin
    # (transaction id, COMMITTED/ABORTED) of its last completed transaction: kept in the
    # checkpoint, so a retried commit or abort is answered across restarts
    last_outcome: tuple[int, TransactionState] | None = None
    reinitialising: int = 0  # init_producer calls under way: this generation may not begin


CompletionHook = Callable[[TransactionMetadata], None]


class Coordinator:
    def __init__(
        self,
        partition_index: int,
        journal: TxnJournal,
        ids: IdSource,
        applier: PartitionApplier,
        *,
        on_complete: CompletionHook | None = None,
    ) -> None:
        self.partition_index = partition_index
        self.journal = journal
        self._ids = ids
        self._applier = applier
        self._on_complete = on_complete
        self._lock = threading.RLock()
        self._producers: dict[str, ProducerEntry] = {}
        self._producers_by_id: dict[int, ProducerEntry] = {}
        self._transactions: dict[int, TransactionMetadata] = {}
        self._recent_outcomes: OrderedDict[int, TransactionState] = OrderedDict()
        self._completion_queue: list[int] = []
        self._completion_ready = threading.Condition(self._lock)
        self._completion_changed = threading.Condition(self._lock)
        self._closed = False
        self._completer: threading.Thread | None = None
        # APPLY fan-out: a transaction's partitions are applied in parallel (recovery
        # uses it too, before start()). Threads are made on first use.
        self._apply_pool = ThreadPoolExecutor(
            max_workers=APPLY_THREADS, thread_name_prefix=f"txn-apply-{partition_index}"
        )

    # --- ids ---------------------------------------------------------------------

    def _new_id(self, kind: str) -> int:
        return (self._ids.next(kind) << PARTITION_BITS) | self.partition_index

    # --- journal then memory ------------------------------------------------------

    def _write(self, record: CoordinatorRecord) -> int:
        """Append a decision to the journal (fsynced) and apply it to memory."""
        offset = self.journal.append(record)
        self._apply(offset, record)
        return offset

    def _apply(self, offset: int, record: CoordinatorRecord) -> None:
        """Apply a journaled record to memory. Used by live decisions and by replay alike."""
        if isinstance(record, InitProducer):
            entry = self._producers.get(record.transactional_id)
            if entry is None:
                entry = ProducerEntry(
                    record.transactional_id,
                    record.producer_id,
                    record.producer_generation,
                    record.timeout_ms,
                )
                self._producers[record.transactional_id] = entry
            else:
                self._producers_by_id.pop(entry.producer_id, None)
                entry.producer_id = record.producer_id
                entry.producer_generation = record.producer_generation
                entry.timeout_ms = record.timeout_ms
            self._producers_by_id[entry.producer_id] = entry
        elif isinstance(record, Begin):
            self._transactions[record.transaction_id] = TransactionMetadata(
                transaction_id=record.transaction_id,
                transactional_id=record.transactional_id,
                producer_id=record.producer_id,
                producer_generation=record.producer_generation,
                state=TransactionState.ONGOING,
                started_ms=record.timestamp_ms,
                timeout_ms=record.timeout_ms,
                begin_offset=offset,
                request_id=record.request_id,
            )
            producer = self._producers.get(record.transactional_id)
            if producer is not None:
                producer.transaction_id = record.transaction_id
                producer.last_begin = (record.request_id, record.transaction_id)
        else:
            txn = self._transactions.get(record.transaction_id)  # type: ignore[attr-defined]
            if txn is None:
                # Replay from a checkpoint meets the ends of transactions begun before it.
                return
            if isinstance(record, AddPartitions):
                txn.partitions.update(record.partitions)
                if not record.by_send:
                    if txn.explicit_partitions is None:
                        txn.explicit_partitions = set()
                    txn.explicit_partitions.update(record.partitions)
            elif isinstance(record, AddOffsets):
                txn.groups.setdefault(record.group_id, set()).update(record.partitions)
            elif isinstance(record, PrepareCommit):
                txn.state = TransactionState.PREPARE_COMMIT
                txn.attempts = record.attempts
                txn.journaled = record.journaled
            elif isinstance(record, PrepareAbort):
                txn.state = TransactionState.PREPARE_ABORT
            elif isinstance(record, Committed | Aborted):
                txn.state = (
                    TransactionState.COMMITTED
                    if isinstance(record, Committed)
                    else TransactionState.ABORTED
                )
                self._forget(txn)

    def _forget(self, txn: TransactionMetadata) -> None:
        self._transactions.pop(txn.transaction_id, None)
        self._recent_outcomes[txn.transaction_id] = txn.state
        if len(self._recent_outcomes) > RECENT_OUTCOMES_MAX:
            self._recent_outcomes.popitem(last=False)
        producer = self._producers.get(txn.transactional_id)
        if producer is not None and producer.transaction_id == txn.transaction_id:
            producer.transaction_id = None
        if producer is not None:
            producer.last_outcome = (txn.transaction_id, txn.state)
        self._completion_changed.notify_all()

    # --- producers ------------------------------------------------------------------

    def _producer(self, producer_id: int, producer_generation: int) -> ProducerEntry:
        entry = self._producers_by_id.get(producer_id)
        if entry is None:
            raise UnknownProducerIdError(
                f"producer id {producer_id} is not known to transaction coordinator "
                f"{self.partition_index}; call init_transactions() first"
            )
        if producer_generation < entry.producer_generation:
            raise ProducerFencedError(
                f"producer {producer_id} (transactional id {entry.transactional_id!r}) has "
                f"generation {producer_generation}, but generation {entry.producer_generation} "
                "exists: a newer producer with the same transactional id took over. Close this "
                "producer."
            )
        if producer_generation > entry.producer_generation:
            raise InvalidTxnStateError(
                f"producer {producer_id} sent generation {producer_generation}, newer than the "
                f"coordinator's {entry.producer_generation}; call init_transactions() again"
            )
        return entry

    def _transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        event: TransactionEvent,
    ) -> TransactionMetadata | None:
        """The open transaction a request names, checked for fencing and against the table.

        None when the transaction completed and the table answers the event with a
        no-op (a retried commit of a committed transaction). Caller holds the lock.
        """
        producer = self._producer(producer_id, producer_generation)
        txn = self._transactions.get(transaction_id)
        if txn is None:
            outcome = self._recent_outcomes.get(transaction_id)
            if outcome is None:
                raise UnknownTransactionError(
                    f"transaction {transaction_id} is not known: it was never begun, or it "
                    "completed long ago; begin a new transaction"
                )
            next_state(transaction_id, outcome, event)  # raises unless a retry of the same end
            return None
        if txn.producer_id != producer.producer_id:
            raise UnknownTransactionError(
                f"transaction {transaction_id} does not belong to producer {producer_id}"
            )
        if txn.producer_generation != producer_generation:
            raise ProducerFencedError(
                f"transaction {transaction_id} belongs to generation {txn.producer_generation}, "
                f"the request carries {producer_generation}"
            )
        next_state(transaction_id, txn.state, event)
        return txn

    def init_producer(
        self, transactional_id: str, timeout_ms: int | None = None
    ) -> ProducerIdentity:
        """Register or re-register a transactional id: same producer id, generation + 1.

        An open transaction of the older generation is aborted first, and this call
        returns after that abort is complete.
        """
        if timeout_ms is None:
            timeout_ms = TRANSACTION_TIMEOUT_MS_DEFAULT
        if not 0 < timeout_ms <= TRANSACTION_TIMEOUT_MS_MAX:
            raise InvalidConfigError(
                f"transaction timeout {timeout_ms} ms is outside 1..{TRANSACTION_TIMEOUT_MS_MAX} ms "
                "(transaction.timeout.ms)"
            )
        with self._lock:
            fenced = self._producers.get(transactional_id)
            if fenced is not None:
                fenced.reinitialising += 1  # its generation may begin nothing new from now on
        try:
            # Loops at most twice: a begin of the older generation racing with the first
            # look is aborted in the second, and none can follow it (reinitialising).
            while True:
                with self._lock:
                    entry = self._producers.get(transactional_id)
                    pending = self._transactions.get(entry.transaction_id or -1) if entry else None
                    if pending is None:
                        producer_id = entry.producer_id if entry else self._new_id("producer_id")
                        generation = entry.producer_generation + 1 if entry else 0
                        self._write(
                            InitProducer(
                                now_ms(), transactional_id, producer_id, generation, timeout_ms
                            )
                        )
                        return ProducerIdentity(producer_id, generation)
                with pending.lock, self._lock:  # the order sends take the two locks in
                    if pending.state is TransactionState.ONGOING:
                        log.info(
                            "transactional id %r re-initialised: aborting its open transaction %d",
                            transactional_id,
                            pending.transaction_id,
                        )
                        self._prepare(pending, TransactionEvent.ABORT)
                self._wait_complete(pending)
        finally:
            if fenced is not None:
                with self._lock:
                    fenced.reinitialising -= 1

    # --- transactions ---------------------------------------------------------------

    def begin(self, producer_id: int, producer_generation: int, request_id: int = 0) -> int:
        with self._lock:
            producer = self._producer(producer_id, producer_generation)
            if request_id and producer.last_begin[0] == request_id:
                return producer.last_begin[1]  # a retried begin: same answer
            previous = self._transactions.get(producer.transaction_id or -1)
        if previous is not None:
            if previous.state is TransactionState.ONGOING:
                raise InvalidTxnStateError(
                    f"producer {producer_id} already has transaction {previous.transaction_id} "
                    "open; commit or abort it before beginning another"
                )
            self._wait_complete(previous)
        with self._lock:
            producer = self._producer(producer_id, producer_generation)
            if producer.reinitialising:
                raise ProducerFencedError(
                    f"transactional id {producer.transactional_id!r} is being re-initialised "
                    f"by a newer producer: generation {producer_generation} may begin no more "
                    "transactions. Close this producer"
                )
            if producer.transaction_id is not None:
                raise ConcurrentTransactionsError(
                    f"producer {producer_id}'s previous transaction is still completing; retry"
                )
            transaction_id = self._new_id("transaction_id")
            self._write(
                Begin(
                    now_ms(),
                    transaction_id,
                    producer.transactional_id,
                    producer_id,
                    producer_generation,
                    producer.timeout_ms,
                    request_id,
                )
            )
            return transaction_id

    def add_partitions(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        with self._lock:
            txn = self._transaction(
                transaction_id, producer_id, producer_generation, TransactionEvent.ADD_PARTITIONS
            )
            assert txn is not None  # the table has no no-op for additions
            new = tuple(sorted({TopicPartition(*p) for p in partitions} - txn.partitions))
            if new:
                self._write(AddPartitions(now_ms(), transaction_id, new))

    def add_offsets(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets_partition: TopicPartition,
        partitions: Iterable[TopicPartition],
    ) -> None:
        """Journal that the transaction commits ``group_id``'s offsets of ``partitions``.

        The group's ``__consumer_offsets`` partition joins the transaction too.
        """
        with self._lock:
            txn = self._transaction(
                transaction_id, producer_id, producer_generation, TransactionEvent.ADD_OFFSETS
            )
            assert txn is not None
            if offsets_partition not in txn.partitions:
                self._write(AddPartitions(now_ms(), transaction_id, (offsets_partition,)))
            new = tuple(
                sorted({TopicPartition(*p) for p in partitions} - txn.groups.get(group_id, set()))
            )
            if new or group_id not in txn.groups:
                self._write(AddOffsets(now_ms(), transaction_id, group_id, new))

    def lock_for_send(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partition: TopicPartition,
    ) -> TransactionMetadata:
        """Check a transactional produce and hold the transaction's lock; the caller releases it.

        Adds the partition to the transaction first if it is new (durably: a partition
        must be in the journal before any of its data is, or a commit would miss it).
        """
        with self._lock:
            txn = self._transaction(
                transaction_id, producer_id, producer_generation, TransactionEvent.SEND
            )
            assert txn is not None
        txn.lock.acquire()
        try:
            with self._lock:
                # Re-check under the transaction lock: an abort may have come in between.
                next_state(transaction_id, txn.state, TransactionEvent.SEND)
                if partition not in txn.partitions:
                    self._write(AddPartitions(now_ms(), transaction_id, (partition,), by_send=1))
        except BaseException:
            txn.lock.release()
            raise
        return txn

    def commit(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
    ) -> None:
        """PREPARE_COMMIT (durable) and return; ``attempts`` limits what is applied (Spark)."""
        chosen = None if attempts is None else tuple(sorted(set(attempts)))
        self._end(
            transaction_id,
            producer_id,
            producer_generation,
            TransactionEvent.COMMIT,
            wait_for_applied,
            chosen,
        )

    def abort(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
    ) -> None:
        self._end(
            transaction_id,
            producer_id,
            producer_generation,
            TransactionEvent.ABORT,
            wait_for_applied,
        )

    def _end(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        event: TransactionEvent,
        wait_for_applied: bool,
        attempts: tuple[str, ...] | None = None,
    ) -> None:
        with self._lock:
            txn = self._transaction(transaction_id, producer_id, producer_generation, event)
            if txn is None:
                return  # a retry of an end that already completed
        with txn.lock:  # wait for in-flight sends of this transaction to land first
            journaled: tuple[tuple[TopicPartition, int], ...] = ()
            if event is TransactionEvent.COMMIT and txn.state is TransactionState.ONGOING:
                journaled = self._journaled_of_sends(txn)  # no send can land meanwhile
            with self._lock:
                self._prepare(txn, event, attempts, journaled)
        if wait_for_applied:
            self._wait_complete(txn)

    def admin_abort(self, transaction_id: int) -> None:
        """Abort a hanging transaction whatever its producer (Kafka's KIP-664 tool)."""
        with self._lock:
            txn = self._transactions.get(transaction_id)
            if txn is None:
                raise UnknownTransactionError(f"transaction {transaction_id} is not in flight")
        with txn.lock:
            with self._lock:
                self._prepare(txn, TransactionEvent.ABORT)
        self._wait_complete(txn)

    def _journaled_of_sends(
        self, txn: TransactionMetadata
    ) -> tuple[tuple[TopicPartition, int], ...]:
        """(partition, journal entries) of every partition a send added to ``txn``.

        Raises TransactionDataMissingError if one holds none: the broker stopped between
        adding the partition and journaling the batch (the producer was never told the
        batch was written), or the local journal was damaged. Either way the commit
        cannot be what the producer sent; nothing is written and the producer aborts.
        """
        journaled = []
        for partition in txn.sent_partitions():
            entries = self._applier.journaled_entries(partition, txn.transaction_id)
            if entries == 0:
                raise TransactionDataMissingError(
                    f"transaction {txn.transaction_id}: {partition.topic}-{partition.partition} "
                    "was written to, but the local data journal holds none of its batches (the "
                    "broker stopped before they were journaled, or the journal was damaged). "
                    "Nothing was committed: abort the transaction and send its records again"
                )
            if entries > 0:  # -1: the topic was deleted, nothing to copy there
                journaled.append((partition, entries))
        return tuple(journaled)

    def _prepare(
        self,
        txn: TransactionMetadata,
        event: TransactionEvent,
        attempts: tuple[str, ...] | None = None,
        journaled: tuple[tuple[TopicPartition, int], ...] = (),
    ) -> None:
        """Write PREPARE_COMMIT / PREPARE_ABORT (if the table says so) and queue completion."""
        result = next_state(txn.transaction_id, txn.state, event)
        if result is Outcome.NO_OP:
            if (
                event is TransactionEvent.COMMIT
                and attempts != txn.attempts
                and not txn.state.is_complete
            ):
                raise InvalidTxnStateError(
                    f"transaction {txn.transaction_id} is already committing with attempts "
                    f"{txn.attempts}; a retried commit must name the same attempts, not {attempts}"
                )
            return
        record: CoordinatorRecord
        if result is TransactionState.PREPARE_COMMIT:
            record = PrepareCommit(now_ms(), txn.transaction_id, attempts, journaled)
        else:
            assert result is TransactionState.PREPARE_ABORT, (event, txn.state, result)
            record = PrepareAbort(now_ms(), txn.transaction_id)
        self._write(record)
        failpoints.hit("coordinator.after_prepare")
        self._queue_completion(txn.transaction_id)

    # --- completion: APPLY then COMMITTED / ABORTED ------------------------------------

    def _queue_completion(self, transaction_id: int) -> None:
        with self._lock:
            self._completion_queue.append(transaction_id)
            self._completion_ready.notify()

    def start(self) -> None:
        """Start the completer thread (after recovery)."""
        self._completer = threading.Thread(
            target=self._complete_forever, name=f"txn-completer-{self.partition_index}", daemon=True
        )
        self._completer.start()

    def _complete_forever(self) -> None:
        """Complete queued decisions in order; one that fails waits and is retried later.

        The decision is durable, so a failed completion (a full disk, a damaged
        journal) is retried, with a delay that doubles per failure up to
        ``COMPLETION_RETRY_S_MAX``; meanwhile the transactions queued behind it
        go ahead: one stuck partition must not hold up every other commit.
        """
        retry_at_s: dict[int, float] = {}  # transaction id -> when it may be tried again
        failures: dict[int, int] = {}
        while True:
            with self._lock:
                transaction_id = self._next_to_complete(retry_at_s)
                if transaction_id is None:
                    return  # closed
                txn = self._transactions.get(transaction_id)
                if txn is None:
                    self._completion_queue.remove(transaction_id)
                    continue
            try:
                self.complete(txn)
            except Exception:
                if self._closed:
                    return  # shutting down: recovery at the next start redoes it
                failed = failures[transaction_id] = failures.get(transaction_id, 0) + 1
                delay_s = min(0.01 * 2 ** (failed - 1), COMPLETION_RETRY_S_MAX)
                retry_at_s[transaction_id] = time.monotonic() + delay_s
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
                if transaction_id in self._completion_queue:
                    self._completion_queue.remove(transaction_id)

    def _next_to_complete(self, retry_at_s: dict[int, float]) -> int | None:
        """The first queued transaction not waiting for a retry; None once closed. Lock held."""
        while not self._closed:
            now_s = time.monotonic()
            waits_s = [retry_at_s.get(t, 0.0) - now_s for t in self._completion_queue]
            for transaction_id, wait_s in zip(self._completion_queue, waits_s, strict=True):
                if wait_s <= 0:
                    return transaction_id
            self._completion_ready.wait(min(waits_s) if waits_s else None)
        return None

    def complete(self, txn: TransactionMetadata) -> None:
        """APPLY the prepared decision to every partition, then journal its completion."""
        if txn.state.is_complete:
            return  # completed by another caller (the completer, or recovery) meanwhile
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

    def _apply_everywhere(self, txn: TransactionMetadata, committing: bool) -> None:
        """APPLY on every partition of ``txn``, in parallel; raise the first failure.

        Every call has finished when this returns or raises, so a retry never runs
        beside a call still in progress on the same partition.
        """

        journaled = dict(txn.journaled)

        def apply(partition: TopicPartition) -> None:
            if committing:
                self._applier.apply_commit(
                    partition, txn.transaction_id, txn.attempts, journaled.get(partition, 0)
                )
            else:
                self._applier.apply_abort(partition, txn.transaction_id)

        partitions = sorted(txn.partitions)
        if len(partitions) <= 1:
            for partition in partitions:
                apply(partition)
            return
        futures: list[Future[None]] = [self._apply_pool.submit(apply, p) for p in partitions]
        wait(futures)
        for future in futures:
            future.result()  # raises the partition's error, if it had one

    def wait_complete(self, txn: TransactionMetadata, timeout_s: float) -> bool:
        """Wait until ``txn`` is COMMITTED or ABORTED; False if ``timeout_s`` passed first."""
        with self._lock:
            return self._completion_changed.wait_for(lambda: txn.state.is_complete, timeout_s)

    def _wait_complete(self, txn: TransactionMetadata) -> None:
        if not self.wait_complete(txn, COMPLETION_WAIT_MS / 1000):
            raise ConcurrentTransactionsError(
                f"transaction {txn.transaction_id} is still being completed after "
                f"{COMPLETION_WAIT_MS} ms; retry"
            )

    # --- timeouts ---------------------------------------------------------------------

    def expire(self, now: int | None = None) -> list[int]:
        """Abort every ONGOING transaction older than its timeout; return their ids."""
        now = now_ms() if now is None else now
        with self._lock:
            expired = [
                txn
                for txn in self._transactions.values()
                if txn.state is TransactionState.ONGOING and now - txn.started_ms > txn.timeout_ms
            ]
        aborted = []
        for txn in expired:
            with txn.lock, self._lock:
                if txn.state is TransactionState.ONGOING:
                    log.info(
                        "transaction %d of %r timed out after %d ms; aborting",
                        txn.transaction_id,
                        txn.transactional_id,
                        txn.timeout_ms,
                    )
                    self._prepare(txn, TransactionEvent.TIMEOUT)
                    aborted.append(txn.transaction_id)
        return aborted

    # --- recovery and checkpoint ------------------------------------------------------

    def recover(self) -> int:
        """Rebuild state from the checkpoint and the journal after it; queue unfinished decisions.

        ONGOING transactions stay open with the time they have left (a producer may
        still commit after a restart); prepared ones are completed by the completer.
        Returns the number of records replayed.
        """
        checkpoint = self.journal.read_checkpoint()
        start = 0
        if checkpoint is not None:
            start = checkpoint.offset
            for snapshot in checkpoint.producers:
                entry = ProducerEntry(
                    snapshot.transactional_id,
                    snapshot.producer_id,
                    snapshot.producer_generation,
                    snapshot.timeout_ms,
                )
                self._producers[entry.transactional_id] = entry
                self._producers_by_id[entry.producer_id] = entry
                if snapshot.last_transaction_id >= 0:
                    outcome = TransactionState(snapshot.last_outcome)
                    entry.last_outcome = (snapshot.last_transaction_id, outcome)
                    self._recent_outcomes[snapshot.last_transaction_id] = outcome
        replayed = 0
        with self._lock:
            for offset, record in self.journal.replay(start):
                self._apply(offset, record)
                replayed += 1
            for txn in sorted(self._transactions.values(), key=lambda t: t.transaction_id):
                producer = self._producers.get(txn.transactional_id)
                stale = producer is None or producer.producer_generation > txn.producer_generation
                if txn.state is TransactionState.ONGOING and stale:
                    # Fenced while open (crash between INIT_PRODUCER and its abort).
                    self._prepare(txn, TransactionEvent.ABORT)
                elif txn.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                    self._queue_completion(txn.transaction_id)
        return replayed

    def checkpoint(self) -> Checkpoint:
        """Write a checkpoint at the earliest in-flight BEGIN; old segments become deletable."""
        with self._lock:
            offset = min(
                (txn.begin_offset for txn in self._transactions.values()),
                default=self.journal.end_offset,
            )
            checkpoint = Checkpoint(
                offset=offset,
                producers=tuple(
                    ProducerSnapshot(
                        p.transactional_id,
                        p.producer_id,
                        p.producer_generation,
                        p.timeout_ms,
                        *((p.last_outcome[0], p.last_outcome[1].value) if p.last_outcome else ()),
                    )
                    for p in self._producers.values()
                ),
            )
            self.journal.write_checkpoint(checkpoint)
            return checkpoint

    # --- views -------------------------------------------------------------------------

    def low_watermark(self) -> int | None:
        """Smallest transaction id still in flight here, or None."""
        with self._lock:
            return min(self._transactions, default=None)

    def transaction(self, transaction_id: int) -> TransactionMetadata | None:
        with self._lock:
            return self._transactions.get(transaction_id)

    def list_transactions(self) -> list[TransactionDescription]:
        with self._lock:
            return [txn.describe() for txn in self._transactions.values()]

    def transactional_id_of(self, producer_id: int) -> str | None:
        """The transactional id ``producer_id`` was issued for (None: unknown here)."""
        with self._lock:
            entry = self._producers_by_id.get(producer_id)
            return None if entry is None else entry.transactional_id

    def in_flight_count(self) -> int:
        with self._lock:
            return len(self._transactions)

    def abandon(self) -> None:
        """Stop as a crash would: no completion is finished, nothing more is written."""
        with self._lock:
            self._closed = True
            self._completion_ready.notify_all()
        self._apply_pool.shutdown(wait=False)
        self.journal.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._completion_ready.notify_all()
        if self._completer is not None:
            self._completer.join(timeout=10)
        self._apply_pool.shutdown(wait=True)
        self.journal.close()


def check_pending_offsets(
    pending: dict[tuple[str, TopicPartition], int],
    group_id: str,
    partitions: Iterable[TopicPartition],
) -> None:
    """Raise PendingTransactionError if any of the group's partitions has a pending commit."""
    for partition in partitions:
        holder = pending.get((group_id, TopicPartition(*partition)))
        if holder is not None:
            raise PendingTransactionError(
                f"group {group_id!r} has offsets for {partition} in transaction {holder}, which "
                "is not complete yet; retry shortly (KIP-447)"
            )
