"""The transaction coordinators this broker runs, and finding the one a request belongs to.

A broker runs coordinator N while it leads ``__txn_journal-N`` (on one node, its sole
member leads them all): the slots (``twinlog.engine.transactions.coordinator_slots``)
load it from the journal partition when its leadership comes here and abandon it when
it goes (``lead``/``follow`` through ``slots``).

A producer id, a transaction id and a transactional id each name their coordinator
(``coordinator_partition_of``); ``for_id`` and ``for_transactional_id`` answer it, or
raise NotCoordinatorError / CoordinatorLoadInProgressError (retriable) on a broker that
does not lead (or is loading) that journal partition.

State, and who changes it:
    slots    one per journal partition; ``lead``/``follow`` come from the member's
             thread, reads from any thread (the slots lock themselves).
    _issued_transactional_ids / _unknown_producer_ids   bounded caches of other
             brokers' answers (``transactional_id_of``), from any request thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from twinlog.engine.base.bounded_cache import BoundedCache
from twinlog.engine.base.errors import (
    CoordinatorLoadInProgressError,
    InvalidTxnStateError,
    NotCoordinatorError,
    TwinlogError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import TopicPartition, TransactionDescription
from twinlog.engine.base.wording import counted
from twinlog.engine.broker.group_offset_fencing import GroupOffsetFence
from twinlog.engine.broker.internal_topics import (
    TXN_JOURNAL_TOPIC,
    coordinator_partition_of_transactional_id,
)
from twinlog.engine.broker.metadata_store import MetadataStore
from twinlog.engine.broker.partition_manager import PartitionManager
from twinlog.engine.broker.producer_owner import idempotent_transactional_id
from twinlog.engine.broker.replicated_journal_append import ReplicatedJournalAppend
from twinlog.engine.transactions.coordinator import Coordinator
from twinlog.engine.transactions.coordinator_slots import CoordinatorSlots
from twinlog.engine.transactions.id_source import IdSource
from twinlog.engine.transactions.partition_calls import (
    LookupProducer,
    PartitionLeaders,
    TransactionCoordinators,
    coordinator_partition_of,
)
from twinlog.engine.transactions.transaction_timings import TransactionTimings
from twinlog.journal.txn_journal import TxnJournal

log = logging.getLogger(__name__)

IDEMPOTENT_ID_TRIES_PER_PARTITION = 20

# Producer ids whose transactional id this broker keeps after asking their coordinator
# elsewhere (about 100 bytes each).
ISSUED_IDS_CACHED_MAX = 100_000
UNKNOWN_ID_KEPT_S = 5.0


class CoordinatorManager:
    def __init__(
        self,
        data_dir: Path,
        metadata: MetadataStore,
        ids: IdSource,
        coordinator_ids: Callable[[], IdSource] | None,
        leaders: PartitionLeaders,
        offset_fence: GroupOffsetFence,
        timings: TransactionTimings,
        partitions: PartitionManager,
        is_stopping: Callable[[], bool],
        roles_known: Callable[[], bool] = lambda: True,
    ) -> None:
        """Called once by the broker's start-up (step 5). ``coordinator_ids``: a cluster
        broker's source of ids for each coordinator it loads (a fresh block, so ids stay
        increasing per coordinator across brokers); default ``ids``. ``roles_known()``:
        this broker has been told every partition's role (a cluster broker just started
        has not: it may yet be told to lead a journal partition)."""
        self._data_dir = data_dir
        self._metadata = metadata
        self._ids = ids
        self._coordinator_ids = coordinator_ids
        self._leaders = leaders
        self._offset_fence = offset_fence
        self._timings = timings
        self._partitions = partitions
        self.slots = CoordinatorSlots(
            self._metadata.journal_partitions,
            self._load,
            self._unload,
            is_stopping,
            roles_known=roles_known,
        )
        # producer id -> the transactional id it was issued for, asked of other brokers'
        # coordinators (never changes once issued; bounded, the oldest dropped first)
        self._issued_transactional_ids = BoundedCache[int, str](ISSUED_IDS_CACHED_MAX)
        # producer id -> when its coordinator said it never issued it (kept a few seconds:
        # an id is issued before its producer sends, so "unknown" does not last)
        self._unknown_producer_ids = BoundedCache[int, float](ISSUED_IDS_CACHED_MAX)

    # --- life cycle ---------------------------------------------------------------------------

    def _restore_offset_fence(self, coordinator: Coordinator) -> None:
        for described in coordinator.list_transactions():
            txn = coordinator.transaction(described.transaction_id)
            if txn is not None:
                self._offset_fence.restore(txn)

    def _load(self, journal_partition: int, leader_epoch: int) -> Coordinator:
        """Coordinator ``journal_partition`` from its replicated journal, as the leader of
        ``__txn_journal-N`` at ``leader_epoch``: barrier, replay, redo, start (a slot's
        loader thread)."""
        partition = self._partitions.get_or_open(
            TopicPartition(TXN_JOURNAL_TOPIC, journal_partition)
        )
        committed_end = partition.wait_committed_to_end(leader_epoch)
        slots = self.slots
        journal = TxnJournal(
            partition.directory,
            log=partition.log,
            appender=ReplicatedJournalAppend(
                partition,
                leader_epoch,
                lambda: slots.write_lost(journal_partition, leader_epoch),
            ),
            pointers=self._metadata.checkpoint_pointers(journal_partition, leader_epoch),
        )
        coordinator = Coordinator(
            journal_partition,
            journal,
            self._ids if self._coordinator_ids is None else self._coordinator_ids(),
            self._leaders,
            on_complete=self._offset_fence.release,
            timings=self._timings,
            coordinator_epoch=leader_epoch,
        )
        started = time.monotonic()
        replayed = coordinator.recover()
        self._restore_offset_fence(coordinator)
        coordinator.start()
        log.info(
            "transaction coordinator %d loaded at epoch %d: %s replayed "
            "(committed end %d), %s in flight, %.0f ms",
            journal_partition,
            leader_epoch,
            counted(replayed, "journal record"),
            committed_end,
            counted(coordinator.in_flight_count(), "transaction"),
            (time.monotonic() - started) * 1000,
        )
        return coordinator

    def _unload(self, coordinator: Coordinator) -> None:
        """Stop a coordinator this broker no longer leads as a crash would: it completes
        nothing more (its successor redoes what it left) and writes nothing more."""
        coordinator.abandon()
        log.info("transaction coordinator %d unloaded", coordinator.partition_index)

    def wait_active(self, journal_partition: int, timeout_s: float) -> bool:
        """Until this broker's coordinator ``journal_partition`` is active."""
        return self.slots.wait_active(journal_partition, timeout_s)

    def abandon_led(self) -> None:
        """Closing the broker: its coordinators write nothing more, as after a crash; the
        next leader (on one node, the next open) redoes what they left."""
        for coordinator in self.slots.close():
            coordinator.abandon()

    def wait_written_durable(self) -> None:
        """Until every active coordinator's journal is durable up to what it wrote (a
        controlled shutdown, before its leaderships move); a coordinator whose wait fails
        is lost already (its successor's journal decides) and is logged, not raised."""
        for coordinator in self.active:
            try:
                coordinator.wait_written_durable()
            except (TwinlogError, OSError) as error:
                log.warning(
                    "transaction coordinator %d: its journal was not made durable before "
                    "the controlled shutdown (%s); transactions begun in its last "
                    "replication round may be unknown to the next coordinator",
                    coordinator.partition_index,
                    error,
                )

    @property
    def active(self) -> list[Coordinator]:
        """The coordinators active on this broker: those of the journal partitions it
        leads and has loaded (on one node, all of them once open)."""
        return self.slots.active()

    # --- which coordinator -------------------------------------------------------------------

    def at(self, journal_partition: int) -> Coordinator:
        """Coordinator N: NotCoordinatorError / CoordinatorLoadInProgressError on a cluster
        broker that does not lead (or is loading) ``__txn_journal-N``; the latter too while
        a broker just started has not yet been told its roles (ZooKeeper may still name it
        the coordinator: clients retry it, not look elsewhere)."""
        return self.slots.get(journal_partition)

    def for_id(self, identifier: int) -> Coordinator:
        """The coordinator of a producer id or a transaction id (their low bits name it)."""
        coordinator_index = coordinator_partition_of(identifier)
        if coordinator_index >= self._metadata.journal_partitions:
            raise InvalidTxnStateError(f"id {identifier} was not issued by this broker")
        return self.at(coordinator_index)

    def for_transactional_id(self, transactional_id: str) -> Coordinator:
        return self.at(
            coordinator_partition_of_transactional_id(
                transactional_id, self._metadata.journal_partitions
            )
        )

    def of_transaction(self, transaction_id: int, producer_id: int) -> Coordinator:
        """The coordinator of a producer's transaction; InvalidTxnStateError when the two
        ids name different coordinators (the transaction is not this producer's)."""
        coordinator = self.for_id(transaction_id)
        if coordinator is not self.for_id(producer_id):
            raise InvalidTxnStateError(
                f"transaction {transaction_id} and producer {producer_id} belong to different "
                "coordinators: the transaction is not this producer's"
            )
        return coordinator

    def idempotent_transactional_id(self, owner: str | None) -> str:
        """A made-up transactional id for an idempotent producer, one that one of this
        broker's active coordinators owns (made up again until it is: each try uses an id,
        and one in ``journal_partitions`` lands on a given coordinator)."""
        active = {c.partition_index for c in self.active}
        if not active:
            raise NotCoordinatorError(
                "this broker coordinates no transaction journal partition yet, so it cannot "
                "give an idempotent producer its id; ask another broker"
            )
        partitions = self._metadata.journal_partitions
        for _ in range(IDEMPOTENT_ID_TRIES_PER_PARTITION * partitions):
            candidate = idempotent_transactional_id(self._ids.next("producer_id"), owner)
            if coordinator_partition_of_transactional_id(candidate, partitions) in active:
                return candidate
        raise NotCoordinatorError(
            f"no made-up idempotent id landed on this broker's coordinators {sorted(active)}; retry"
        )

    def transactional_id_of(
        self, producer_id: int, coordinators: TransactionCoordinators
    ) -> str | None:
        """The transactional id a producer id belongs to (None: unknown), asking
        ``coordinators`` (this broker's own, or a cluster transport to the others)."""
        coordinator_index = coordinator_partition_of(producer_id)
        if producer_id < 0 or coordinator_index >= self._metadata.journal_partitions:
            return None
        if self.slots.is_active(coordinator_index):  # its coordinator is here: ask it
            try:
                return self.slots.get(coordinator_index).transactional_id_of(producer_id)
            except NotCoordinatorError:
                pass  # unloaded meanwhile: ask where it went
        # The producer's coordinator may be another broker. An id is issued for one
        # transactional id for good, so a known answer is kept (a bounded cache: a
        # partition leader checks every batch's producer id).
        known = self._issued_transactional_ids.get(producer_id)
        if known is not None:
            return known
        unknown_at = self._unknown_producer_ids.get(producer_id)
        if unknown_at is not None and time.monotonic() - unknown_at < UNKNOWN_ID_KEPT_S:
            return None  # batches with made-up ids do not each cost a call to another broker
        found = coordinators.lookup_producer(LookupProducer(producer_id, 0)).transactional_id
        if found is not None:
            self._issued_transactional_ids.put(producer_id, found)
        else:
            self._unknown_producer_ids.put(producer_id, time.monotonic())
        return found

    # --- transaction ids ------------------------------------------------------------------------

    def low_watermark(self) -> int:
        """Smallest transaction id that may still be in flight: ids below it are all
        complete (the journal purge drops their leftovers).

        Per coordinator: an active one's own mark (the smallest id in flight, else the
        next it would hand out: read under its lock, so a begin cannot slip below it);
        another broker's, the mark it published with its checkpoint pointer (CLUSTER.md
        §3.7), 0 while it has published none. A published mark stays a lower bound for
        good: a coordinator's ids only grow, also across failover.
        """
        marks = []
        for journal_partition in range(self._metadata.journal_partitions):
            if self.slots.is_active(journal_partition):
                try:
                    marks.append(self.slots.get(journal_partition).current_low_watermark())
                    continue
                except (NotCoordinatorError, CoordinatorLoadInProgressError):
                    pass  # unloaded (or its journal write lost) meanwhile: its published mark
            pointer = self._metadata.checkpoint_pointers(journal_partition).read()
            if pointer is None or pointer.low_watermark is None:
                return 0
            marks.append(pointer.low_watermark)
        return min(marks)

    # --- administration -------------------------------------------------------------------------

    def in_flight_count(self) -> int:
        return sum(c.in_flight_count() for c in self.active)

    def list_transactions(self) -> list[TransactionDescription]:
        found = []
        for coordinator in self.active:
            found.extend(coordinator.list_transactions())
        return sorted(found, key=lambda t: t.transaction_id)

    def admin_abort(self, transaction_id: int) -> None:
        coordinator_index = coordinator_partition_of(transaction_id)
        coordinator = (
            self.at(coordinator_index)
            if coordinator_index < self._metadata.journal_partitions
            else None
        )
        # One answer for every id that is not in flight, whichever coordinator its low bits name.
        if coordinator is None or coordinator.transaction(transaction_id) is None:
            raise UnknownTransactionError(
                f"transaction {transaction_id} is not in flight (never begun, already "
                "completed, or not issued by this broker); list those in flight with "
                "`twinlog txn list` (Admin.list_transactions())"
            )
        coordinator.admin_abort(transaction_id)

    def expire(self, now: int) -> list[int]:
        """Abort the transactions past their timeout; their ids."""
        aborted = []
        for coordinator in self.active:
            aborted.extend(coordinator.expire(now))
        return aborted


__all__ = ["CoordinatorManager"]
