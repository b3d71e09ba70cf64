"""The transaction coordinator of one transaction-journal partition: the requests it answers.

It owns the in-memory state of its producers and in-flight transactions and
the journal that makes that state durable. Every change follows one order,
as Kafka's TransactionMetadata: check the change against the state table
(``twinlog.engine.transactions.txn_state``), append the record to the journal (fsynced), then
apply it to memory. So memory never runs ahead of the journal, and a restart
rebuilds exactly the acknowledged state by replay.

Its parts, one job each:

    coordinator.py             the requests (init_producer, begin, add_partitions,
                               add_offsets, register_partition, commit, abort,
                               admin_abort, expire) and the decisions they journal
    coordinator_replay.py      memory, rebuilt from the journal; checkpoints
    coordinator_completion.py  the worker that APPLYs decisions and journals their end
    transaction_metadata.py    what memory holds per transaction and per producer

Commit path (double journaling, seed 001):

    commit():   count_entries on every partition -> PREPARE_COMMIT (with the counts)
                -> journal (fsync) -> answer the producer
    completer:  APPLY_COMMIT on every partition -> COMMITTED -> journal

From PREPARE_COMMIT on, the commit is guaranteed: a crash before COMMITTED is
redone by ``recover()``, and APPLY_COMMIT is idempotent. Abort is the same with
PREPARE_ABORT / APPLY_ABORT / ABORTED.

Fencing: ``init_producer`` bumps the generation of a transactional id; every
later request carrying an older generation gets ProducerFencedError, and the
old generation's open transaction is aborted.

The seam to partitions (``partition_calls``, docs/seam.md): the coordinator
knows partitions only as ``PartitionLeaders`` (count_entries, apply_commit,
apply_abort) and is known to them only through ``register_partition``, the
call a partition makes on a transaction's first batch there. Every call
carries the coordinator epoch (``coordinator_epoch``: the epoch of this
coordinator's journal partition; 0 until the cluster) and the partition leader
epoch the caller expects; stale ones are refused.

A transactional produce no longer holds anything of the coordinator's: its
partition freezes the transaction at the count (J3), so a batch is either in
the count PREPARE_COMMIT records or refused; and APPLY_ABORT freezes it too, so
no entry can arrive after it ran (seed 003's problem). While a commit counts,
``register_partition`` refuses the transaction, so the set of partitions counted
is the set committed.

Group commit: a decision is appended to the journal and applied to memory under the
lock, but made durable (fsynced; on a cluster also held by the in-sync replicas)
after the lock is let go (``_wait_durable``), so the decisions of many producers share
one fsync and one replication round. The rule that replaces "memory never runs ahead
of the journal": **no request answers, and no partition is called to apply a
decision, before the journal is durable up to the end it was when the request last
let the lock go**: so nothing anyone was told, or any partition copied, rests on a
record that could be lost. If that wait fails, the record's fate is unknown, and the
journal's appender finishes this coordinator (it is reloaded from the log, whose
records then decide; ``ReplicatedJournalAppend``).

Two answers promise nothing durable and do not wait: ``begin`` and ``add_partitions``
(on a cluster each wait is a replication round the producer would sit through before it
may send). A BEGIN or ADD_PARTITIONS lost in a crash leaves a transaction the next
coordinator never heard of, or one without that partition: the partition's
``register_partition`` (before it journals the first batch) and the commit both wait
for everything written before them, so no batch is journaled and no commit answered on
a lost record.

A lost BEGIN is taken back (*adopted*) by the next coordinator when the producer's
transaction first reaches it (a partition's registration, an add, a commit or an abort):
so a leadership moved from a live coordinator (a preferred election, a reassignment) or a
coordinator's crash does not fail a transaction the producer was told it had begun. Not
when the coordinator's journal had its tail cut when it was opened: a torn or damaged
tail may have held durable records, so a BEGIN lost there may have batches journaled,
which an adoption would leave out of its commit. Nothing of such a transaction was journaled anywhere (a registration
answered means its BEGIN was durable), so beginning it again under its own id is the
same transaction. The id must be one the previous coordinators may have handed out and
this one has not heard of: of this coordinator's partition, above every transaction id
its journal holds (``_adoption_floor``, taken at ``recover``), below the ids this one
hands out (a load takes a fresh, higher block), newer than the producer generation's
last transaction, with none of it open; and the request must come within the longest
transaction timeout of its producers after the load (a transaction older than its
timeout would be aborted). Until then the published low watermark stays at the floor,
so no partition drops a journal row an adopted transaction could write: after a
coordinator moves, partitions keep the journal rows of the transactions it completes
for that long before they drop them. Anything else is
UnknownTransactionError, as before.

Thread rule: every public method may be called from any thread. One lock
guards the coordinator's memory and the journal appends (a decision is
appended and applied atomically with respect to other decisions); each
transaction also has its own lock, which orders the decisions about it
(commit, abort, timeout, fencing); partition calls and the durability waits are
made without the coordinator's lock.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    ConcurrentTransactionsError,
    FencedLeaderEpochError,
    InvalidConfigError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionCoordinatorFencedError,
    TransactionDataMissingError,
    UnknownLeaderEpochError,
    UnknownProducerIdError,
    UnknownTransactionError,
)
from twinlog.engine.base.side_by_side import run_side_by_side
from twinlog.engine.base.types import (
    ProducerIdentity,
    TopicPartition,
    TransactionDescription,
    TransactionState,
)
from twinlog.engine.records.batch_format import PRODUCER_GENERATION_MAX, check_producer_generation
from twinlog.engine.transactions.coordinator_completion import CompletionHook, CompletionWorker
from twinlog.engine.transactions.coordinator_replay import CoordinatorMemory
from twinlog.engine.transactions.id_source import IdSource
from twinlog.engine.transactions.partition_calls import (
    PARTITION_BITS,
    PARTITION_GONE,
    CallEpochs,
    CountEntries,
    PartitionLeaders,
    RegisterPartition,
)
from twinlog.engine.transactions.transaction_metadata import (
    ProducerEntry,
    TransactionMetadata,
    now_ms,
)
from twinlog.engine.transactions.transaction_timings import TransactionTimings
from twinlog.engine.transactions.txn_state import Outcome, TransactionEvent, next_state
from twinlog.journal.txn_checkpoint import Checkpoint
from twinlog.journal.txn_journal import TxnJournal
from twinlog.journal.txn_records import (
    AddOffsets,
    AddPartitions,
    Begin,
    CoordinatorRecord,
    InitProducer,
    PrepareAbort,
    PrepareCommit,
)

log = logging.getLogger(__name__)

TRANSACTION_TIMEOUT_MS_DEFAULT = 60_000
PARTITION_CALL_THREADS = 4  # count_entries calls of one decision at once, beside the caller's
COMPLETION_WAIT_MS = 5_000  # how long begin/init wait for the previous transaction to complete
# Kafka's rule (TransactionMetadata.isProducerEpochExhausted, KIP-360): a producer id whose
# generation reached Short.MAX_VALUE - 1 gets no further bump; its transactional id takes a
# new producer id at generation 0 instead. 32767 itself is never handed out, so the
# coordinator could always fence a producer at 32766 with one more bump.
GENERATION_EXHAUSTED_FROM = PRODUCER_GENERATION_MAX - 1
PARTITION_MASK = (1 << PARTITION_BITS) - 1  # a transaction id's coordinator partition
# How long after a load a lost BEGIN may be adopted when no producer's transaction timeout
# says longer (Kafka's default transaction.timeout.ms).
ADOPTION_WINDOW_MS_DEFAULT = 60_000


class Coordinator:
    def __init__(
        self,
        partition_index: int,
        journal: TxnJournal,
        ids: IdSource,
        applier: PartitionLeaders,
        *,
        on_complete: CompletionHook | None = None,
        timings: TransactionTimings | None = None,
        coordinator_epoch: int = 0,
        adoption_window_ms: int | None = None,
    ) -> None:
        """``adoption_window_ms``: how long after ``recover`` a lost BEGIN may be taken
        back (None: the longest transaction timeout of the producers it recovers)."""
        self.partition_index = partition_index
        # The leader epoch of this coordinator's journal partition, carried by every call to
        # a partition (fixed on one node; a newer leader of the journal partition has more).
        self.coordinator_epoch = coordinator_epoch
        self.timings = timings or TransactionTimings()  # read by a server's metrics
        self.journal = journal
        self._ids = ids
        self._applier = applier
        self._lock = threading.RLock()
        self._memory = CoordinatorMemory()
        # The journal end after the last record written (lock held to write it): a request
        # answers once the journal is durable up to it (``_wait_durable``).
        self._written_end = 0
        # Transaction ids from here up may be BEGINs lost with the previous coordinator's
        # journal tail, until the monotonic deadline: see "A lost BEGIN is taken back".
        # None: no adoption (not recovered yet, or the window passed).
        self._adoption_floor: int | None = None
        self._adoption_until_s = 0.0
        self._adoption_window_ms = adoption_window_ms
        self._counting: set[int] = set()  # commits counting entries: no partition may join
        # The count_entries of a commit's (or abort's) partitions, side by side; made at
        # the first transaction over two partitions or more.
        self._calls_pool: ThreadPoolExecutor | None = None
        self._completion = CompletionWorker(
            partition_index,
            self._lock,
            self._memory.transactions.get,
            self._write,
            applier,
            self._epochs_for,
            on_complete,
        )

    def _epochs_for(self, topic_partition: TopicPartition) -> CallEpochs:
        """What a call to ``topic_partition`` carries."""
        return CallEpochs(
            self.partition_index,
            self.coordinator_epoch,
            self._applier.leader_epoch(topic_partition),
        )

    # --- ids ---------------------------------------------------------------------

    def _new_id(self, kind: str) -> int:
        return (self._ids.next(kind) << PARTITION_BITS) | self.partition_index

    # --- journal then memory ------------------------------------------------------

    def _write(self, record: CoordinatorRecord) -> int:
        """Append a decision to the journal and apply it to memory (lock held). Not yet
        durable: the request answers after ``_wait_durable``."""
        offset, self._written_end = self.journal.write(record)
        self._memory.apply(offset, record)
        self.timings.journaled(record)
        return offset

    def _wait_durable(self) -> None:
        """Until the journal is durable up to everything written so far (lock NOT held:
        the decisions written meanwhile by other requests share the fsync)."""
        self.journal.wait_durable(self._written_end)

    def wait_written_durable(self) -> None:
        """Until everything this coordinator wrote so far is durable, the BEGINs and
        ADD_PARTITIONS answered without waiting among them: a controlled shutdown calls it
        before the leaderships move, so the next coordinator's journal holds every
        transaction a producer was told it had begun (raises as ``_wait_durable``)."""
        self._wait_durable()

    # --- producers ------------------------------------------------------------------

    def _producer(self, producer_id: int, producer_generation: int) -> ProducerEntry:
        check_producer_generation(producer_generation)  # every request names one
        entry = self._memory.producers_by_id.get(producer_id)
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
        txn = self._memory.transactions.get(transaction_id)
        if txn is None and transaction_id not in self._memory.recent_outcomes:
            txn = self._adopt(transaction_id, producer)
        if txn is None:
            outcome = self._memory.recent_outcomes.get(transaction_id)
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

    def _adopt(self, transaction_id: int, producer: ProducerEntry) -> TransactionMetadata | None:
        """Begin again a transaction whose BEGIN the previous coordinator lost (module text:
        "A lost BEGIN is taken back"), if ``transaction_id`` can be one; None if not.
        Lock held."""
        floor = self._adoption_floor_now()
        if (
            floor is None
            or transaction_id < floor
            or transaction_id & PARTITION_MASK != self.partition_index
            or transaction_id >= self._next_transaction_id()
            or producer.reinitialising
        ):
            return None
        known = [
            known_id
            for known_id in (
                producer.transaction_id,
                producer.completing,
                producer.last_outcome[0] if producer.last_outcome is not None else None,
            )
            if known_id is not None
        ]
        if known and transaction_id <= max(known):
            return None  # not newer than what this producer generation did last
        current = self._memory.transactions.get(producer.transaction_id or -1)
        if current is not None and current.state is TransactionState.ONGOING:
            return None  # one open already: the producer never began this one after it
        log.warning(
            "coordinator %d: transaction %d of %r begun again: its BEGIN was lost with the "
            "previous coordinator's unreplicated journal tail (a leadership move or a crash)",
            self.partition_index,
            transaction_id,
            producer.transactional_id,
        )
        self._write(
            Begin(
                now_ms(),
                transaction_id,
                producer.transactional_id,
                producer.producer_id,
                producer.producer_generation,
                producer.timeout_ms,
                0,
            )
        )
        return self._memory.transactions[transaction_id]

    def _adoption_floor_now(self) -> int | None:
        """The adoption floor while the window lasts, else None (and the window is shut).
        Lock held."""
        if self._adoption_floor is not None and time.monotonic() >= self._adoption_until_s:
            self._adoption_floor = None
        return self._adoption_floor

    def _next_transaction_id(self) -> int:
        return (self._ids.peek("transaction_id") << PARTITION_BITS) | self.partition_index

    def init_producer(
        self, transactional_id: str, timeout_ms: int | None = None
    ) -> ProducerIdentity:
        """Register or re-register a transactional id: same producer id, generation + 1.

        An open transaction of the older generation is aborted first, and this call
        returns after that abort is complete. Once the generation reached
        GENERATION_EXHAUSTED_FROM (the header holds 16 bits), the transactional id gets a
        new producer id at generation 0 instead, which fences the old id as a bump would.
        """
        if timeout_ms is None:
            timeout_ms = TRANSACTION_TIMEOUT_MS_DEFAULT
        # The upper bound is the broker's (transaction_timeout_ms_max, checked by
        # Broker.init_producer before this): a fixed one here refused what it allowed.
        if timeout_ms <= 0:
            raise InvalidConfigError(
                f"transaction timeout {timeout_ms} ms: give 1 ms or more (transaction.timeout.ms)"
            )
        with self._lock:
            fenced = self._memory.producers.get(transactional_id)
            if fenced is not None:
                fenced.reinitialising += 1  # its generation may begin nothing new from now on
        try:
            # Loops at most twice: a begin of the older generation racing with the first
            # look is aborted in the second, and none can follow it (reinitialising).
            while True:
                with self._lock:
                    entry = self._memory.producers.get(transactional_id)
                    pending = (
                        self._memory.transactions.get(entry.transaction_id or -1) if entry else None
                    )
                    if pending is None:
                        if entry and entry.producer_generation < GENERATION_EXHAUSTED_FROM:
                            producer_id = entry.producer_id
                            generation = entry.producer_generation + 1
                        else:  # a new transactional id, or its generations are used up
                            producer_id, generation = self._new_id("producer_id"), 0
                        self._write(
                            InitProducer(
                                now_ms(), transactional_id, producer_id, generation, timeout_ms
                            )
                        )
                        identity = ProducerIdentity(producer_id, generation)
                        break
                with pending.lock:
                    if pending.state is TransactionState.ONGOING:
                        log.info(
                            "transactional id %r re-initialised: aborting its open transaction %d",
                            transactional_id,
                            pending.transaction_id,
                        )
                        self._freeze_and_prepare(pending, TransactionEvent.ABORT)
                self._wait_complete(pending)
        finally:
            if fenced is not None:
                with self._lock:
                    fenced.reinitialising -= 1
        self._wait_durable()
        return identity

    # --- transactions ---------------------------------------------------------------

    def begin(self, producer_id: int, producer_generation: int, request_id: int = 0) -> int:
        """A new transaction of the producer. Pipelined: its previous transaction need
        only be prepared (its decision durable); that one is completed in the background,
        before any later one of the producer (``CompletionWorker``). At most one completes
        behind an open transaction: an older one still completing is waited for."""
        with self._lock:
            producer = self._producer(producer_id, producer_generation)
            if request_id and producer.last_begin[0] == request_id:
                retried = producer.last_begin[1]  # a retried begin: same answer
            else:
                retried = None
        if retried is not None:
            return retried  # not waited for: see "Two answers promise nothing durable"
        with self._lock:
            producer = self._producer(producer_id, producer_generation)
            previous = self._memory.transactions.get(producer.transaction_id or -1)
            older = self._memory.transactions.get(producer.completing or -1)
        if previous is not None and previous.state is TransactionState.ONGOING:
            raise InvalidTxnStateError(
                f"producer {producer_id} already has transaction {previous.transaction_id} "
                "open; commit or abort it before beginning another"
            )
        if older is not None:
            self._wait_complete(older)
        with self._lock:
            producer = self._producer(producer_id, producer_generation)
            if producer.reinitialising:
                raise ProducerFencedError(
                    f"transactional id {producer.transactional_id!r} is being re-initialised "
                    f"by a newer producer: generation {producer_generation} may begin no more "
                    "transactions. Close this producer"
                )
            previous = self._memory.transactions.get(producer.transaction_id or -1)
            if (previous is not None and previous.state is TransactionState.ONGOING) or (
                producer.completing in self._memory.transactions
            ):
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
        return transaction_id  # not waited for: see "Two answers promise nothing durable"

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
                # Not waited for: register_partition waits before a batch is journaled.
                self._write(AddPartitions(now_ms(), transaction_id, new))

    def register_partition(self, request: RegisterPartition) -> None:
        """A partition's first batch of a transaction: check the producer and the state,
        journal the partition into the transaction (durably: a partition must be in the
        journal before any of its data is, or a commit would miss it)."""
        epochs = request.epochs
        # The partition sends the highest epoch of this coordinator it has seen. Lower than
        # ours is normal (a partition this coordinator has not called yet, after a failover);
        # higher means a newer coordinator has called it: this one was replaced.
        if (
            epochs.coordinator_partition != self.partition_index
            or epochs.coordinator_epoch > self.coordinator_epoch
        ):
            raise TransactionCoordinatorFencedError(
                f"{request.topic_partition} registered transaction {request.transaction_id} "
                f"with coordinator {epochs.coordinator_partition} at epoch "
                f"{epochs.coordinator_epoch}; this is coordinator {self.partition_index} at "
                f"epoch {self.coordinator_epoch}"
            )
        known = self._applier.leader_epoch(request.topic_partition)
        if epochs.leader_epoch < known:
            raise FencedLeaderEpochError(
                f"{request.topic_partition} registered at leader epoch {epochs.leader_epoch}, "
                f"but epoch {known} leads it: that leader was replaced"
            )
        if epochs.leader_epoch > known:
            raise UnknownLeaderEpochError(
                f"{request.topic_partition} registered at leader epoch {epochs.leader_epoch}, "
                f"newer than the {known} this coordinator knows; retry shortly"
            )
        transaction_id = request.transaction_id
        with self._lock:
            # An offsets partition registering for a group is Kafka's AddOffsetsToTxn.
            event = TransactionEvent.ADD_OFFSETS if request.group_id else TransactionEvent.SEND
            txn = self._transaction(
                transaction_id, request.producer_id, request.producer_generation, event
            )
            assert txn is not None
            if transaction_id in self._counting:
                raise InvalidTxnStateError(
                    f"transaction {transaction_id} is being committed: it takes no batches for "
                    f"{request.topic_partition} any more; this one was not written"
                )
            if request.topic_partition not in txn.partitions:
                self._write(
                    AddPartitions(now_ms(), transaction_id, (request.topic_partition,), by_send=1)
                )
            if request.group_id and request.group_id not in txn.groups:
                # The group whose offsets the offsets partition takes in: listed with the
                # transaction (list_transactions, the ACLs on it) and released with it.
                self._write(AddOffsets(now_ms(), transaction_id, request.group_id, ()))
        self._wait_durable()  # before the partition journals a batch of it

    def commit(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """PREPARE_COMMIT (durable) and return; ``attempts`` limits what is applied (Spark);
        ``batches_written`` (None: unchecked) is what the producer saw written, per partition:
        a partition holding fewer entries refuses the commit before PREPARE_COMMIT."""
        chosen = None if attempts is None else tuple(sorted(set(attempts)))
        self._end(
            transaction_id,
            producer_id,
            producer_generation,
            TransactionEvent.COMMIT,
            wait_for_applied,
            chosen,
            batches_written,
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
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        started_s = time.monotonic()
        with self._lock:
            txn = self._transaction(transaction_id, producer_id, producer_generation, event)
        if txn is None:
            self._wait_durable()  # the completion it repeats may still be waiting
            return  # a retry of an end that already completed
        with txn.lock:  # one decision about a transaction at a time
            self._freeze_and_prepare(txn, event, attempts, batches_written)
        if event is TransactionEvent.COMMIT:
            self.timings.commit.observe(time.monotonic() - started_s)
        if wait_for_applied:
            self._wait_complete(txn)

    def admin_abort(self, transaction_id: int) -> None:
        """Abort a hanging transaction whatever its producer (Kafka's KIP-664 tool)."""
        with self._lock:
            txn = self._memory.transactions.get(transaction_id)
            if txn is None:
                raise UnknownTransactionError(f"transaction {transaction_id} is not in flight")
        with txn.lock:
            self._freeze_and_prepare(txn, TransactionEvent.ABORT)
        self._wait_complete(txn)

    def _freeze_and_prepare(
        self,
        txn: TransactionMetadata,
        event: TransactionEvent,
        attempts: tuple[str, ...] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Decide an ONGOING transaction's end: count_entries on every partition of it
        (each freezes it there), then PREPARE_COMMIT with the counts, or PREPARE_ABORT.
        A commit whose counts fall short of ``batches_written`` is refused.

        No partition can join meanwhile (``register_partition`` refuses a counting
        transaction), and each partition counted refuses the transaction's later
        batches: a commit's counts are final, and nothing is journaled once an abort
        is decided (it is refused at once, not only after APPLY_ABORT). Caller holds
        the transaction's lock, not the coordinator's: partitions are called without it.
        """
        committing = event is TransactionEvent.COMMIT
        with self._lock:
            repeated = txn.state is not TransactionState.ONGOING
            if repeated:
                written = self._prepare(txn, event, attempts)  # a no-op or a refusal, by the table
                assert not written, (txn.transaction_id, txn.state, event)
            else:
                next_state(txn.transaction_id, txn.state, event)  # refused before any call
                self._counting.add(txn.transaction_id)
                partitions = sorted(txn.partitions)
                sent = set(txn.sent_partitions())
        if repeated:
            self._wait_durable()  # the decision it repeats may still be waiting
            return
        try:
            journaled: tuple[tuple[TopicPartition, int], ...] = ()
            if committing:
                journaled = self._count_entries(txn.transaction_id, partitions, sent)
                _check_batches_written(txn.transaction_id, journaled, batches_written or {})
            else:
                self._freeze_for_abort(txn.transaction_id, partitions)
            with self._lock:
                prepared = self._prepare(txn, event, attempts, journaled)
        finally:
            with self._lock:
                self._counting.discard(txn.transaction_id)
        self._wait_durable()
        if prepared:  # only a durable decision is applied to partitions
            self._completion.queue(txn.transaction_id)

    def _freeze_for_abort(self, transaction_id: int, partitions: list[TopicPartition]) -> None:
        """count_entries for its freeze only: an abort is decided whatever a partition
        answers (APPLY_ABORT freezes it again before it drops the entries)."""

        def freeze(topic_partition: TopicPartition) -> None:
            request = CountEntries(
                transaction_id, topic_partition, self._epochs_for(topic_partition)
            )
            try:
                self._applier.count_entries(request)
            except Exception as error:
                log.warning(
                    "aborting transaction %d: %s did not freeze it (%s); APPLY_ABORT will",
                    transaction_id,
                    topic_partition,
                    error,
                )

        self._side_by_side(freeze, partitions)

    def _side_by_side(
        self, call: Callable[[TopicPartition], None], partitions: list[TopicPartition]
    ) -> None:
        """``call`` on every partition: those led elsewhere at once (one round trip for
        all instead of one after another), those led here one after another on this
        thread meanwhile (a freeze and a count of the local journal: cheaper than a
        thread hop each); raises the first failure once every call has returned."""
        leads_here = getattr(self._applier, "leads_here", None)
        local = [p for p in partitions if leads_here is not None and leads_here(p)]
        remote = [p for p in partitions if p not in local]

        def call_each_local() -> None:
            first_error: BaseException | None = None
            for topic_partition in local:
                try:
                    call(topic_partition)
                except BaseException as error:  # the others are still called
                    first_error = first_error or error
            if first_error is not None:
                raise first_error

        if not remote:
            call_each_local()
            return
        if self._calls_pool is None:
            self._calls_pool = ThreadPoolExecutor(
                max_workers=PARTITION_CALL_THREADS,
                thread_name_prefix=f"txn-calls-{self.partition_index}",
            )
        run_side_by_side(
            self._calls_pool, [call_each_local] + [functools.partial(call, p) for p in remote]
        )

    def _count_entries(
        self, transaction_id: int, partitions: list[TopicPartition], sent: set[TopicPartition]
    ) -> tuple[tuple[TopicPartition, int], ...]:
        """(partition, entries) of every partition holding entries of the transaction.

        Raises TransactionDataMissingError if a partition a send added holds none: the
        broker stopped between adding the partition and journaling the batch (the
        producer was never told the batch was written), or the local journal was
        damaged. Either way the commit cannot be what the producer sent; nothing is
        written and the producer aborts.
        """
        counts: dict[TopicPartition, int] = {}

        def count(topic_partition: TopicPartition) -> None:
            request = CountEntries(
                transaction_id, topic_partition, self._epochs_for(topic_partition)
            )
            counts[topic_partition] = self._applier.count_entries(request).entry_count

        self._side_by_side(count, partitions)
        journaled = []
        for topic_partition in partitions:
            entries = counts[topic_partition]
            if entries == 0 and topic_partition in sent:
                raise TransactionDataMissingError(
                    f"transaction {transaction_id}: {topic_partition} "
                    "was written to, but the local data journal holds none of its batches (the "
                    "broker stopped before they were journaled, or the journal was damaged). "
                    "Nothing was committed: abort the transaction and send its records again"
                )
            if entries != PARTITION_GONE and entries > 0:  # gone: the topic was deleted
                journaled.append((topic_partition, entries))
        return tuple(journaled)

    def _prepare(
        self,
        txn: TransactionMetadata,
        event: TransactionEvent,
        attempts: tuple[str, ...] | None = None,
        journaled: tuple[tuple[TopicPartition, int], ...] = (),
    ) -> bool:
        """Write PREPARE_COMMIT / PREPARE_ABORT if the table says so (lock held); True if
        written: the caller queues its completion once it is durable."""
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
            return False
        record: CoordinatorRecord
        if result is TransactionState.PREPARE_COMMIT:
            record = PrepareCommit(now_ms(), txn.transaction_id, attempts, journaled)
        else:
            assert result is TransactionState.PREPARE_ABORT, (event, txn.state, result)
            record = PrepareAbort(now_ms(), txn.transaction_id)
        self._write(record)
        failpoints.hit("coordinator.after_prepare")
        return True

    # --- completion (``coordinator_completion``) ------------------------------------------

    def start(self) -> None:
        """Start the completion worker (after recovery)."""
        self._completion.start()

    def complete(self, txn: TransactionMetadata) -> None:
        """APPLY the prepared decision to every partition, then journal its completion."""
        self._completion.complete(txn)

    def wait_complete(self, txn: TransactionMetadata, timeout_s: float) -> bool:
        """Wait until ``txn`` is COMMITTED or ABORTED; False if ``timeout_s`` passed first."""
        return self._completion.wait_complete(txn, timeout_s)

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
                for txn in self._memory.transactions.values()
                if txn.state is TransactionState.ONGOING and now - txn.started_ms > txn.timeout_ms
            ]
        aborted = []
        for txn in expired:
            with txn.lock:
                if txn.state is TransactionState.ONGOING:
                    log.info(
                        "transaction %d of %r timed out after %d ms; aborting",
                        txn.transaction_id,
                        txn.transactional_id,
                        txn.timeout_ms,
                    )
                    self._freeze_and_prepare(txn, TransactionEvent.TIMEOUT)
                    aborted.append(txn.transaction_id)
        return aborted

    # --- recovery and checkpoint (``coordinator_replay``) ---------------------------------

    def recover(self) -> int:
        """Rebuild memory from the checkpoint and the journal after it; queue unfinished decisions.

        ONGOING transactions stay open with the time they have left (a producer may
        still commit after a restart); prepared ones are completed by the completer.
        Returns the number of records replayed.
        """
        with self._lock:
            replayed = self._memory.replay(self.journal)
            # the first id of this coordinator's partition above every one its journal holds
            highest = self._memory.highest_transaction_id()
            self._adoption_floor = (
                ((highest >> PARTITION_BITS) + 1) << PARTITION_BITS
            ) | self.partition_index
            if self.journal.cut_at_open:
                # The cut tail may have held durable records (a damaged disk): a BEGIN lost
                # there may have batches journaled, which an adoption would leave out of
                # its commit. Such a transaction stays unknown: its producer aborts.
                log.warning(
                    "coordinator %d: its journal's tail was cut at open: a transaction "
                    "whose BEGIN was lost is not begun again",
                    self.partition_index,
                )
                self._adoption_floor = None
            # the longest a transaction of this coordinator may live
            window_ms = self._adoption_window_ms
            if window_ms is None:
                window_ms = max(
                    (p.timeout_ms for p in self._memory.producers.values()),
                    default=ADOPTION_WINDOW_MS_DEFAULT,
                )
            self._adoption_until_s = time.monotonic() + window_ms / 1000
            to_complete = []
            for txn in sorted(self._memory.transactions.values(), key=lambda t: t.transaction_id):
                producer = self._memory.producers.get(txn.transactional_id)
                stale = producer is None or producer.producer_generation > txn.producer_generation
                if txn.state is TransactionState.ONGOING and stale:
                    # Fenced while open (crash between INIT_PRODUCER and its abort).
                    if self._prepare(txn, TransactionEvent.ABORT):
                        to_complete.append(txn.transaction_id)
                elif txn.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                    to_complete.append(txn.transaction_id)
        self._wait_durable()
        for transaction_id in to_complete:
            self._completion.queue(transaction_id)
        return replayed

    def checkpoint(self) -> Checkpoint:
        """Write a checkpoint at the earliest in-flight BEGIN; old segments become deletable.
        Its pointer publishes this coordinator's low watermark (``published_low_watermark``)."""
        with self._lock:
            return self._memory.write_checkpoint(self.journal, self.published_low_watermark())

    def published_low_watermark(self) -> int:
        """Below every transaction id in flight here or handed out later: the smallest in
        flight, or the next id this coordinator would hand out (its ids only grow, also
        across failover: each load takes a fresh, higher block). Lock held."""
        lowest = [self._next_transaction_id()]
        in_flight = self._memory.low_watermark()
        if in_flight is not None:
            lowest.append(in_flight)
        floor = self._adoption_floor_now()
        if floor is not None:
            lowest.append(floor)  # a lost BEGIN from there up may still be adopted
        return min(lowest)

    # --- views -------------------------------------------------------------------------

    def current_low_watermark(self) -> int:
        """``published_low_watermark`` now (the broker's journal purge), once the records
        it rests on are durable: partitions drop journal rows below it, and a COMMITTED a
        crash took would have its completion redone on rows that are gone."""
        with self._lock:
            low_watermark = self.published_low_watermark()
        self._wait_durable()
        return low_watermark

    def low_watermark(self) -> int | None:
        """Smallest transaction id still in flight here, or None."""
        with self._lock:
            return self._memory.low_watermark()

    def ongoing_transaction_of(self, producer_id: int, producer_generation: int) -> int | None:
        """The transaction this producer generation has ONGOING, or None (none open, or
        another generation, or an unknown producer): a look, never a refusal."""
        with self._lock:
            entry = self._memory.producers_by_id.get(producer_id)
            if entry is None or entry.producer_generation != producer_generation:
                return None
            txn = self._memory.transactions.get(entry.transaction_id or -1)
            if txn is None or txn.state is not TransactionState.ONGOING:
                return None
            return txn.transaction_id

    def latest_transaction_of(self, producer_id: int, producer_generation: int) -> int | None:
        """The transaction an end request of this producer generation is about when it
        names none (Kafka's EndTxn): the open one, else the last it ended (so a retried end
        is answered as the first was, by ``commit`` or ``abort``); None if it never had one.
        Raises as any request of the producer does (fenced, unknown)."""
        with self._lock:
            producer = self._producer(producer_id, producer_generation)
            latest = self._memory.transactions.get(producer.transaction_id or -1)
            if latest is not None and latest.producer_generation == producer_generation:
                return latest.transaction_id
            if producer.last_outcome is not None:  # this generation's (replay keeps it so)
                return producer.last_outcome[0]
            return None

    def transaction(self, transaction_id: int) -> TransactionMetadata | None:
        with self._lock:
            return self._memory.transactions.get(transaction_id)

    def list_transactions(self) -> list[TransactionDescription]:
        with self._lock:
            return [txn.describe() for txn in self._memory.transactions.values()]

    def transactional_id_of(self, producer_id: int) -> str | None:
        """The transactional id ``producer_id`` was issued for (None: unknown here)."""
        with self._lock:
            entry = self._memory.producers_by_id.get(producer_id)
            return None if entry is None else entry.transactional_id

    def in_flight_started_ms(self) -> list[int]:
        """When each in-flight transaction began (no descriptions built: read at every scrape)."""
        with self._lock:
            return [txn.started_ms for txn in self._memory.transactions.values()]

    def in_flight_count(self) -> int:
        with self._lock:
            return len(self._memory.transactions)

    def abandon(self) -> None:
        """Stop as a crash would: no completion is finished, nothing more is written."""
        self._completion.abandon()
        self._close_calls_pool()
        self.journal.close()

    def close(self) -> None:
        self._completion.close()
        self._close_calls_pool()
        self.journal.close()

    def _close_calls_pool(self) -> None:
        pool, self._calls_pool = self._calls_pool, None
        if pool is not None:
            pool.shutdown(wait=False)


def _check_batches_written(
    transaction_id: int,
    journaled: tuple[tuple[TopicPartition, int], ...],
    batches_written: Mapping[TopicPartition, int],
) -> None:
    """Refuse a commit whose journals hold fewer batches than the producer saw written.

    Each batch the producer was told is written is one journal entry of its partition
    (a retry of it is a duplicate, never a second entry), so a count below that means
    entries were lost between their acknowledgement and the count (a journal damaged, a
    failover that kept less than it acknowledged). Committing then would apply part of
    the transaction, or none of it, as if whole: the producer must abort instead.
    """
    counted = dict(journaled)
    short = {
        topic_partition: (written, counted.get(topic_partition, 0))
        for topic_partition, written in batches_written.items()
        if counted.get(topic_partition, 0) < written
    }
    if short:
        described = ", ".join(
            f"{topic_partition}: {held} of {written}"
            for topic_partition, (written, held) in sorted(short.items())
        )
        log.error(
            "transaction %d: the journals hold fewer batches than were written (%s); "
            "commit refused",
            transaction_id,
            described,
        )
        raise TransactionDataMissingError(
            f"transaction {transaction_id}: the local data journals hold fewer of its batches "
            f"than were acknowledged as written ({described}; held of written). Nothing was "
            "committed: abort the transaction and send its records again"
        )
