"""One topic-partition inside the broker: its data log, its single writer, its waiters.

Writes reach a partition three ways, all through the copier's single writer
(``copier.PartitionWriter``), so a transaction's copy is never interleaved
with anything:

    plain produce          sequence check -> data log append -> acknowledge
    transactional produce  sequence check (per transaction) -> ENTRY in the partition's
                           journal log (fsynced) -> applied to LMDB -> acknowledge
    APPLY_COMMIT/ABORT     journal -> data log (copier) -> wake fetchers

The partition's journal log lives in ``DIRECTORY/journal`` (``twinlog.journal.journal_logs``),
so it goes with the partition's directory when the topic is deleted.

Both logs are replicated (on one node, to nobody: a cluster of one), co-led (one
leader, one ISR, one epoch; CLUSTER.md §3.3, §3.4; the replica half of the class is ``partition_replica``'s
``PartitionReplica``: roles, the leader's waits and answers, the follower's appends, the
high watermark): a transactional batch is acknowledged once its ENTRY is
committed and applied (J2), the copier waits for the copy's replication before
MARK_APPLIED (J4), followers apply only committed records and never copy (J1, J5),
and a new leader writes, copies and decides nothing until its in-sync replicas hold
both logs as it held them at promotion (the promotion barrier); its first write then
finishes a half-done copy (J6).

Fetch is a long poll in the broker's one purgatory (``engine.base.long_poll``, keyed by
this partition): a reader waits until enough bytes lie past its offset or its wait runs
out; every move of what readers see wakes it (``_wake_fetchers``). Consumers read below ``readable_end``: the
high watermark (what the in-sync replicas hold; on one node, the log end, moved after
each append by the thread that made it), held below a copy an earlier term left
half-done until it is finished.

The coordinator is reached through ``TransactionCoordinators`` only
(``partition_calls``): the first batch of a transaction here registers the
partition with it; later ones are checked here (``transaction_gate``). Calls
from coordinators pass ``epochs`` (``partition_epochs``) first.

Thread rule: any thread may call any method. ``_plain_lock`` makes the
sequence check and the append of plain batches one step; a transaction's
appends here hold its gate (``transaction_gate``), which its count and its
APPLY freeze.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from twinlog.copier import CommitCall, PartitionWriter
from twinlog.copier.marks_left import MarksLeft
from twinlog.engine.base.bounded_cache import BoundedCache
from twinlog.engine.base.errors import (
    DiskFullError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import (
    FetchResult,
    ProducerDescription,
    ProduceResult,
    TopicPartition,
)
from twinlog.engine.broker.partition_epochs import PartitionEpochs
from twinlog.engine.broker.partition_replica import PartitionReplica
from twinlog.engine.broker.partition_role import NO_ROLE, PartitionRole, Role
from twinlog.engine.broker.producer_snapshots import ProducerSnapshots
from twinlog.engine.broker.producer_state import FIRST_SEQUENCES, SequenceTracker
from twinlog.engine.broker.promotion_recoveries import PromotionRecoveries
from twinlog.engine.broker.send_gate import SendGate
from twinlog.engine.broker.transaction_gate import GateEntry, TransactionGate
from twinlog.engine.log import CompactionReport, DataLog, LogConfig, compact
from twinlog.engine.log.high_watermark import HighWatermark, batches_below
from twinlog.engine.records.batch_format import NO_PRODUCER_ID, BatchHeader, read_header
from twinlog.engine.records.decompression_budget import DecompressionBudget
from twinlog.engine.replication.fetch_calls import (
    LogKind,
)
from twinlog.engine.replication.replica_set import ReplicaSet
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.partition_calls import (
    CallEpochs,
    RegisterPartition,
    TransactionCoordinators,
    coordinator_partition_of,
)
from twinlog.journal import CopyState, JournalLogs

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1  # delete_records up to the high watermark (Kafka's -1)
SEQUENCE_WRAP = 1 << 31  # a Kafka producer's sequence after 2**31 - 1 is 0
EPOCH_SEQUENCES_MAX = 10_000  # per-epoch producers remembered per partition (~100 bytes each)


class Partition(PartitionReplica):
    def __init__(
        self,
        topic_partition: TopicPartition,
        directory: Path,
        config: LogConfig,
        journal: JournalLogs,
        replication: ReplicationSettings,
        coordinators: TransactionCoordinators | None = None,
        high_watermark_from: int | None = None,
        marks_left: MarksLeft | None = None,
        promotion_recoveries: PromotionRecoveries | None = None,
    ) -> None:
        """``replication``: the broker's settings (one node is a cluster of one). The
        partition starts with no role and serves nothing until ``take_role``
        (``partition_role``): the sole member of a single node gives it at once.
        ``high_watermark_from``: the last run's checkpointed high watermark, if any.
        ``marks_left``: the broker's list of writers holding MARK_APPLIED records for
        their next copy group (``twinlog.copier.marks_left``); None: written at once.
        ``promotion_recoveries``: the broker's list of promoted leaders its background
        round asks to recover; None: a promoted leader recovers at its first write."""
        self.topic_partition = topic_partition
        self.name = str(topic_partition)
        self.directory = directory
        self.log = DataLog.open(directory, config)
        self.journal = journal
        try:  # replays into LMDB what the journal log holds beyond LMDB's applied offset
            journal.open_partition(
                self.name,
                directory,
                config.batch_bytes_max,
                wait_committed=self._wait_journal_committed,
            )
        except BaseException:
            self.log.close()
            raise
        self.writer = PartitionWriter(
            self.name,
            self.log,
            journal,
            wait_replicated=self._wait_copy_replicated,
            marks_left=marks_left,
            marks_beside_copy=self._has_followers,
        )
        # A replica recovers its copies only once it leads and has passed the promotion
        # barrier (J5: followers never decide; J6: resume on promotion); until then the
        # high watermark stays below a half-done copy (``_unfinished_copy_from``).
        # A restarted replica's log may end in what no other replica holds: nothing past
        # the last checkpointed high watermark (``high_watermark_from``, clamped to the
        # log; none: the log start) is readable until the in-sync replicas say so.
        self.high_watermark = HighWatermark(
            self.log,
            directory,
            start_below=(
                self.log.log_start_offset if high_watermark_from is None else high_watermark_from
            ),
        )
        self.replication = replication
        self.promotion_recoveries = promotion_recoveries
        self.closed = False  # set first by ``close``: the background round leaves it be
        self.role: PartitionRole = NO_ROLE
        self.replicas: ReplicaSet | None = None  # while LEADER
        # While LEADER and not yet through the promotion barrier: each log's end at
        # promotion, which the in-sync replicas must hold before this leader acts.
        self._promotion_ends: dict[LogKind, int] | None = None
        # While LEADER with a copy a killed process left torn in the data log (its
        # append-in-progress mark, ``DataLog.unfinished_append_from``): its first offset,
        # above which consumers read nothing until the copy is finished (the writer's
        # recovery, at this leader's first write or APPLY): the high watermark passes it
        # (it is committed), ``readable_end`` does not.
        self._unfinished_copy_from: int | None = None
        self.writer.on_recovered = self._copies_finished
        # The newest leader epoch asked for, set before a role change takes the lock:
        # writers waiting for their replicas give up at once instead of holding it back.
        self._asked_epoch = -1
        self._plain_lock = threading.Lock()
        # Orders every high watermark advance against an ISR expansion's check and
        # proposal (``isr_change_due``), as Kafka's leaderIsrUpdateLock does; taken after
        # ``_plain_lock`` where both are, never before it.
        self._watermark_lock = threading.Lock()
        self.send_gate = SendGate(self.name)
        self.transaction_gate = TransactionGate(self.name)
        self.epochs = PartitionEpochs(self.name, self.log)
        self.coordinators = coordinators  # None: no coordinator to register with (tools)
        self.data_arrived = threading.Condition()
        self.producer_snapshots = ProducerSnapshots(self.name, Path(self.directory), self.log)
        self.sequences = self._load_sequences()
        # (transaction id, attempt) -> sequences of its batches on this partition
        self.transaction_sequences: dict[tuple[int, str], SequenceTracker] = {}
        # Producer id -> (leader epoch, generation, the sequence after its last batch here)
        # of producers
        # that number their batches per epoch across transactions (Kafka's): a
        # transaction's first batch here must carry that sequence (or 0), so a first batch
        # that failed while the next one went through is a gap, not a silent loss. Known
        # for the batches this replica journaled at its current leader epoch; otherwise
        # (a restart, a failover, an evicted producer: another leader may have taken more
        # batches since, so an older entry is not trusted) the first batch takes any sequence,
        # as Kafka's broker does for a producer it has no state for.
        self._epoch_sequences: BoundedCache[int, tuple[int, int, int]] = BoundedCache(
            EPOCH_SEQUENCES_MAX
        )

    def _load_sequences(self) -> SequenceTracker:
        """Rebuild idempotence state: the newest snapshot that matches the log, + the log
        after it (``producer_snapshots``)."""
        return self.producer_snapshots.load()

    # --- writes ----------------------------------------------------------------------

    def append_plain(self, batch: bytes, header: BatchHeader) -> ProduceResult:
        """Append, and on a cluster leader wait until every in-sync replica holds the batch
        (``acks=all``; CLUSTER.md I1). A retry of a batch already written is answered with
        its first offset, once it is replicated too."""
        self._wait_promoted()
        with self._plain_lock:
            self.check_serves_clients()
            role, replicas = self.role, self.replicas
            self._check_enough_in_sync(replicas)
            check = self.sequences.check(header, self.name)
            if check.duplicate:
                result = ProduceResult(check.base_offset, duplicate=True)
            else:
                base_offset = self.writer.append_plain(batch, validate=False)  # checked at the door
                self.sequences.observe(header, base_offset)
                self.producer_snapshots.after_append(self.sequences)
                self._advance_high_watermark()
                result = ProduceResult(base_offset)
        self._wake_fetchers()
        if replicas is not None:
            self._wait_replicated(
                LogKind.DATA, result.base_offset + header.last_offset_delta + 1, role
            )
        return result

    def append_as_leader(
        self, batch: bytes, leader_epoch: int, *, defer_flush: bool = False
    ) -> tuple[int, int]:
        """A broker-internal write (the transaction journal, CLUSTER.md §3.5): appended only
        while this broker leads at ``leader_epoch`` (a coordinator never writes into a later
        epoch than the one it loaded) with enough replicas in sync; nothing is written when
        it raises. Returns (base offset, end offset) for ``wait_acknowledged``.
        ``defer_flush``: not fsynced yet; the caller's ``GroupFlush`` makes it durable."""
        self._wait_promoted()
        with self._plain_lock:
            role = self.role
            if role.role is not Role.LEADER or role.leader_epoch != leader_epoch:
                self.check_serves_clients()
                raise NotLeaderOrFollowerError(
                    f"{self.name}: led at epoch {leader_epoch} no longer (now "
                    f"{role.role.value} at epoch {role.leader_epoch})"
                )
            self._check_enough_in_sync(self.replicas)
            base_offset = self.writer.append_plain(batch, validate=False, defer_flush=defer_flush)
            self._advance_high_watermark()
        self._wake_fetchers()
        return base_offset, base_offset + read_header(batch).last_offset_delta + 1

    def _transaction_tracker(self, transaction_id: int, attempt: str) -> SequenceTracker:
        tracker = self.transaction_sequences.get((transaction_id, attempt))
        if tracker is None:
            tracker = self.transaction_sequences[(transaction_id, attempt)] = SequenceTracker()
            # First batch of this transaction here since the broker started: rebuild
            # from the journal (a few headers), so retries across a restart are known.
            tag = attempt.encode("utf-8")
            sequences = self.journal.sequences(self.name, transaction_id)
            for entry_tag, entry_header in self.journal.iter_tagged_headers(self.name, sequences):
                if entry_tag == tag:
                    tracker.observe(entry_header, -1)
        return tracker

    def append_transactional(
        self,
        transaction_id: int,
        batch: bytes,
        header: BatchHeader,
        attempt: str = "",
        sender: tuple[int, int] | None = None,
        sequences_per_epoch: bool = False,
    ) -> ProduceResult:
        """Journal a batch of an open transaction, registering this partition with the
        transaction's coordinator first if it is the transaction's first batch here.

        Sequences are checked per (transaction, attempt): every task attempt of a
        Spark job numbers its own batches from 0. ``sender``: (producer id, generation)
        when the batch does not carry them (the broker's own group offsets batch).
        ``sequences_per_epoch``: the producer numbers its batches to this partition for
        its whole epoch, across transactions (a Kafka producer), so the transaction's
        first batch here may carry any sequence; the later ones follow it.
        """
        self.check_serves_clients()
        self._wait_promoted()
        self._check_enough_in_sync(self.replicas)
        # never into the journal of a topic being deleted, nor of a counted transaction
        with self.send_gate.send(), self.transaction_gate.appending(transaction_id) as gate:
            self._register(
                transaction_id, sender or (header.producer_id, header.producer_generation), gate
            )
            return self._append_checked(
                transaction_id, batch, header, attempt, gate, sequences_per_epoch
            )

    def _append_checked(
        self,
        transaction_id: int,
        batch: bytes,
        header: BatchHeader,
        attempt: str,
        gate: GateEntry,
        sequences_per_epoch: bool,
    ) -> ProduceResult:
        """``append_transactional``'s sequence check and journal append as one step per
        transaction: T's append lock is held from the check until the tracker has recorded
        the batch, so a retry racing its original finds it recorded (a duplicate). It is
        recorded once it is in the journal log, before the wait for its replicas, which
        the lock does not cover."""
        lock = gate.append_lock
        lock.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                lock.release()

        try:
            tracker = self._transaction_tracker(transaction_id, attempt)
            where = f"{self.name} in transaction {transaction_id}"
            check = tracker.check(
                header,
                f"{where} attempt {attempt!r}" if attempt else where,
                self._first_sequences(header) if sequences_per_epoch else FIRST_SEQUENCES,
            )
            if check.duplicate:
                release()
                if check.base_offset >= 0:
                    # The first copy was appended here but its wait was not answered: a
                    # duplicate is acknowledged once that entry is committed (J2), as Kafka
                    # answers a duplicate only once the original is replicated.
                    self._wait_journal_committed(check.base_offset + 1)
                    self.journal.wait_applied()  # J2, J3: the count reads applied entries
                return ProduceResult(-1, duplicate=True)
            # Recorded as soon as the entry is in the journal log (Kafka updates its
            # producer state on append, not on acknowledgement): a retry after a wait that
            # failed (too few replicas, a timeout) is then a duplicate, not a second entry.
            observed: list[int] = []

            def record(journal_offset: int) -> None:
                tracker.observe(header, journal_offset)
                if sequences_per_epoch:
                    after = (header.base_sequence + header.record_count) % SEQUENCE_WRAP
                    self._epoch_sequences.put(
                        header.producer_id,
                        (self.role.leader_epoch, header.producer_generation, after),
                    )
                observed.append(journal_offset)

            def on_appended(journal_offset: int) -> None:  # this thread, in the append
                record(journal_offset)
                release()

            self.journal.append(
                self.name,
                transaction_id,
                batch,
                producer_id=header.producer_id,
                producer_generation=header.producer_generation,
                base_sequence=header.base_sequence,
                attempt=attempt.encode("utf-8"),
                on_appended=on_appended,
            )
            if not observed:
                record(-1)
        finally:
            release()
        return ProduceResult(-1)

    def _first_sequences(self, header: BatchHeader) -> tuple[int, ...] | None:
        """What the first batch of a per-epoch producer's transaction here may carry: 0,
        or the sequence after its last batch here in this generation; None (any) when this
        replica does not know it at its current leader epoch (``_epoch_sequences``)."""
        known = self._epoch_sequences.get(header.producer_id)
        if known is None or known[:2] != (self.role.leader_epoch, header.producer_generation):
            return None
        return (0, known[2])

    def register_transaction(
        self, transaction_id: int, sender: tuple[int, int], group_id: str
    ) -> None:
        """Register this offsets partition with the transaction's coordinator for
        ``group_id``'s offsets, writing nothing here yet: the broker's own offsets batch
        checks its transaction (``sender``: producer id, generation) before it fences the
        offsets' other holders, and the coordinator records the group with it."""
        self.check_serves_clients()
        self._wait_promoted()
        with self.send_gate.send(), self.transaction_gate.appending(transaction_id) as gate:
            self._register(transaction_id, sender, gate, group_id)

    def _register(
        self, transaction_id: int, sender: tuple[int, int], gate: GateEntry, group_id: str = ""
    ) -> None:
        """Ask the coordinator on the transaction's first batch here, on any batch while
        it is frozen, and for each group's offsets first sent here; check the others
        against what it accepted (Kafka's KIP-890: verified once, cached)."""
        frozen_at = self.transaction_gate.frozen_at(gate)
        told = not group_id or group_id in gate.groups
        if gate.registered == sender and frozen_at is None and told:
            return
        if gate.registered is not None and gate.registered != sender:
            producer_id, generation = gate.registered
            if sender[0] != producer_id:
                raise UnknownTransactionError(
                    f"transaction {transaction_id} does not belong to producer {sender[0]}"
                )
            raise ProducerFencedError(
                f"transaction {transaction_id} belongs to generation {generation} of producer "
                f"{producer_id}, the batch carries {sender[1]}"
            )
        if self.coordinators is None:
            if frozen_at is not None:  # nobody to ask whether the decision stands
                raise InvalidTxnStateError(
                    f"transaction {transaction_id} is being decided on {self.name}: it takes "
                    "no more batches; abort it"
                )
        else:
            coordinator_partition = coordinator_partition_of(transaction_id)
            epochs = CallEpochs(
                coordinator_partition,
                self.epochs.coordinator_epoch(coordinator_partition),
                self.epochs.leader_epoch,
            )
            self.coordinators.register_partition(
                RegisterPartition(transaction_id, self.topic_partition, *sender, epochs, group_id)
            )
        self.transaction_gate.mark_registered(transaction_id, gate, sender)
        if group_id:
            gate.groups.add(group_id)
        if frozen_at is not None:  # the decision that froze it failed: T is open again
            self.transaction_gate.thaw(gate, frozen_at)

    def _forget_transaction(self, transaction_id: int) -> None:
        # list(): sends of other transactions add trackers from other threads meanwhile
        for key in [key for key in list(self.transaction_sequences) if key[0] == transaction_id]:
            self.transaction_sequences.pop(key, None)

    def journaled_entries(self, transaction_id: int) -> int:
        """Journal entries of the transaction while it is open here (0: none)."""
        record = self.journal.transaction(self.name, transaction_id)
        return record.entry_count if record and record.state is CopyState.OPEN else 0

    def count_entries(self, transaction_id: int) -> int:
        """Freeze the transaction here, wait for its appends in progress, count its entries
        (J3: every acknowledged batch is in the count, every later one is refused)."""
        self._check_leads()
        self.transaction_gate.freeze(transaction_id)
        return self.journaled_entries(transaction_id)

    def apply_commit(
        self,
        transaction_id: int,
        attempts: tuple[str, ...] | None = None,
        journaled_entries: int = 0,
    ) -> tuple[int, int]:
        outcome = self.apply_commits([(transaction_id, attempts, journaled_entries)])[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def apply_commits(
        self, calls: Sequence[tuple[int, tuple[str, ...] | None, int]]
    ) -> list[tuple[int, int] | BaseException]:
        """APPLY_COMMIT of several transactions (transaction id, attempts, journaled
        entries), copied here in this order, consecutive ones as one copy group (one fsync
        of the data log, one of the journal log per mark); each one's (first, next) offset
        or the error it got."""
        self._check_leads()
        for transaction_id, _attempts, _journaled in calls:
            self.transaction_gate.freeze(transaction_id)  # no append may race the copy
        try:
            outcomes = self.writer.apply_commits(
                [
                    CommitCall(
                        transaction_id,
                        None if attempts is None else [a.encode("utf-8") for a in attempts],
                        journaled_entries,
                    )
                    for transaction_id, attempts, journaled_entries in calls
                ]
            )
        finally:
            # Prepared, the coordinator refuses the transactions' later batches itself.
            for transaction_id, _attempts, _journaled in calls:
                self.transaction_gate.forget(transaction_id)
        self._advance_high_watermark()
        copied = False
        for (transaction_id, _attempts, _journaled), outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                continue
            self._forget_transaction(transaction_id)
            copied = copied or outcome[1] > outcome[0]
        if copied:  # a transactional partition's log grows by copies
            with self._plain_lock:
                self.producer_snapshots.after_append(self.sequences)
        self._wake_fetchers()
        return outcomes

    def apply_abort(self, transaction_id: int) -> None:
        self._check_leads()
        self.transaction_gate.freeze(transaction_id)  # appends in progress land, then go
        try:
            self.writer.apply_abort(transaction_id)
        finally:
            self.transaction_gate.forget(transaction_id)
        self._forget_transaction(transaction_id)

    def compact_log(
        self,
        should_stop: Callable[[], bool] | None = None,
        budget: DecompressionBudget | None = None,
    ) -> CompactionReport:
        """Compact the data log (cleanup.policy compact), leaving alone the batches of a copy
        not yet recorded as APPLIED: the copier's crash recovery recognises them in the log
        by every header field, which compaction would change. Each batch it decompresses is
        charged to ``budget`` (the broker's) meanwhile."""
        return compact(
            self.log,
            protected_from_offset=self._applying_start_offset,
            should_stop=should_stop,
            budget=budget,
        )

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Size and age retention, never deleting a segment that holds a batch of a copy not
        yet recorded as APPLIED (the bound compaction gets): the copier's retry of that
        record recognises the copy in the log, from its first batch."""
        deleted = self.log.apply_retention(now_ms, protected_from_offset=self._retention_bound)
        # The journal log keeps what an open or applying transaction, or a replay, needs.
        self.journal.apply_retention(self.name)
        return deleted

    def delete_records(self, before_offset: int) -> int:
        """Kafka's DeleteRecords on this leader: the log starts at ``before_offset`` from now
        on (``HIGH_WATERMARK``: at the high watermark); return the log start now (Kafka's
        low watermark). Followers take it from their next fetch answers (``apply_fetched``).

        As Kafka: an offset above the high watermark (or negative) is OffsetOutOfRangeError,
        one at or below the start changes nothing. As retention: the start stops at the
        first batch of a copy not yet recorded as APPLIED (the copier's recovery finds the
        copy in the log from there), so the start returned may be below ``before_offset``;
        the copy is finished within moments, and the same call then goes further.
        """
        self._wait_promoted()  # a new leader's high watermark is settled past its barrier
        with self._plain_lock:
            self.check_serves_clients()
            high_watermark = self.high_watermark.value
            target = high_watermark if before_offset == HIGH_WATERMARK else before_offset
            if not 0 <= target <= high_watermark:
                start = self.log.log_start_offset
                raise OffsetOutOfRangeError(
                    f"{self.name}: cannot delete records before offset {before_offset}: "
                    f"records up to the high watermark {high_watermark} may be deleted (the "
                    f"log starts at {start}); pass an offset up to it, or -1 for all of them",
                    start,
                    high_watermark,
                )
            start = self.log.advance_log_start(
                target, protected_from_offset=self._applying_start_offset
            )
        if start < target:
            log.info(
                "%s: records deleted below %d, not %d: a transaction's copy from there is "
                "not yet recorded as applied",
                self.name,
                start,
                target,
            )
        return start

    def _retention_bound(self) -> int:
        """Retention deletes nothing from here on: the start of a copy not yet recorded as
        APPLIED, and the high watermark (Kafka deletes only below it: a log start past the
        high watermark would leave nothing a consumer may read, and no valid range)."""
        applying = self._applying_start_offset()
        hw = self.high_watermark.value
        return hw if applying is None else min(hw, applying)

    def _applying_start_offset(self) -> int | None:
        applying = self.journal.transactions(self.name, [CopyState.APPLYING])
        return min((record.first_offset for record in applying), default=None)

    # --- reads -----------------------------------------------------------------------

    def finish_copies(self) -> None:
        """A leader: finish now a copy a killed process left torn in the data log (J6),
        instead of at its first write or APPLY (the sole member, at open), so readers get
        past it. Other half-done copies (nothing of it copied yet, or all of it) show
        readers nothing partial: they are finished at the first write or APPLY, which
        spares a journal barrier per partition at open. A full disk defers it: the first
        write once space returns finishes it, and readers stay below it meanwhile."""
        if self._unfinished_copy_from is None:
            return
        self._check_leads()
        try:
            self.writer.recover()
        except DiskFullError as error:
            log.warning("%s: finishing a copy deferred: %s", self.name, error)

    def _copies_finished(self) -> None:
        """The writer finished (or found none) the copies an earlier term left half-done:
        readers may pass where they began (the writer's thread, under its lock)."""
        if self._unfinished_copy_from is not None:
            self._unfinished_copy_from = None
            self._wake_fetchers()

    @property
    def readable_end(self) -> int:
        """What a consumer may read below: the high watermark, held below a copy an
        earlier term left half-done until this leader finishes it (a transaction is read
        whole or not at all; the copy is committed in the log, only not finished)."""
        high_watermark = self.high_watermark.value
        unfinished = self._unfinished_copy_from
        if unfinished is None:
            return high_watermark
        return max(self.log.log_start_offset, min(high_watermark, unfinished))

    def fetch(
        self, offset: int, max_bytes: int, max_wait_ms: int = 0, min_bytes: int = 1
    ) -> FetchResult:
        """Whole batches from ``offset`` below the high watermark; waits up to ``max_wait_ms``
        for ``min_bytes``. The result's end is the high watermark, not the log end."""
        self.check_serves_clients()

        def read() -> FetchResult:
            start, end = self.log.log_start_offset, self.readable_end
            # Kafka's rule: an offset the log holds but the high watermark has not reached
            # yet is valid and answers nothing (yet); only one past the log end is out of range.
            log_end = max(end, self.log.log_end_offset)
            if offset < start or offset > log_end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is outside {self.name}'s log [{start}, {log_end}]; seek "
                    "to the beginning or the end",
                    start,
                    end,
                )
            records = batches_below(self.log.read(offset, max_bytes), end) if offset < end else b""
            return FetchResult(records, start, end)

        return self.replication.long_poll.poll(
            (self.topic_partition,),
            read,
            lambda result: len(result.records) >= min_bytes,
            max(0, max_wait_ms) / 1000,
        )

    def _untouched_transaction_trackers(
        self, touched: dict[tuple[int, str], SequenceTracker]
    ) -> dict[tuple[int, str], SequenceTracker]:
        """Trackers of this partition's journaled, unapplied transactions that no send has
        touched since the broker started (their trackers are built lazily), read from the
        journal's headers. Not kept: the send path owns ``transaction_sequences``."""
        touched_ids = {transaction_id for transaction_id, _ in touched}
        found: dict[tuple[int, str], SequenceTracker] = {}
        unapplied = (CopyState.OPEN, CopyState.APPLYING)
        for record in self.journal.transactions(self.name, unapplied):
            if record.transaction_id in touched_ids:
                continue
            sequences = self.journal.sequences(self.name, record.transaction_id)
            for tag, header in self.journal.iter_tagged_headers(self.name, sequences):
                key = (record.transaction_id, tag.decode("utf-8", "replace"))
                found.setdefault(key, SequenceTracker()).observe(header, -1)
        return found

    def describe_producers(self) -> list[ProducerDescription]:
        """Producers that wrote here: idempotent ones (from the data log) and those with an
        unapplied transaction (from the journal, after a restart too: KIP-664's hanging
        transactions)."""
        transaction_trackers = dict(self.transaction_sequences)
        transaction_trackers.update(self._untouched_transaction_trackers(transaction_trackers))
        open_transactions: dict[int, int] = {}
        for (transaction_id, _), tracker in transaction_trackers.items():
            for producer_id in tracker.producers:
                open_transactions[producer_id] = transaction_id
        described = []
        with self._plain_lock:
            trackers = [self.sequences, *transaction_trackers.values()]
            seen: set[int] = set()
            for tracker in trackers:
                for producer_id, sequences in tracker.producers.items():
                    if producer_id in seen or producer_id == NO_PRODUCER_ID:
                        continue
                    seen.add(producer_id)
                    described.append(
                        ProducerDescription(
                            producer_id=producer_id,
                            producer_generation=sequences.producer_generation,
                            last_sequence=sequences.last_sequence,
                            last_timestamp_ms=sequences.last_timestamp_ms,
                            current_transaction_id=open_transactions.get(producer_id, -1),
                        )
                    )
        return described

    def reconfigure(self, config: LogConfig) -> None:
        """The topic's settings changed: the data log takes them, and the journal log its
        batch limit (a larger max.message.bytes must fit in an ENTRY too)."""
        self.log.reconfigure(config)
        self.journal.set_batch_bytes_max(self.name, config.batch_bytes_max)
        replicas = self.replicas  # while leading: its next writes count against the new one
        if replicas is not None:
            replicas.min_insync_replicas = config.min_insync_replicas

    def close(self) -> None:
        # MARK_APPLIED records left for a next copy group are not written here: on a
        # cluster the write would wait for followers that may be closing too. The next
        # leader's recovery (this replica's after a restart) records them from the copies.
        self.closed = True
        if self.promotion_recoveries is not None:
            self.promotion_recoveries.forget(self)
        with self._plain_lock:
            try:
                self.log.flush()
                self.producer_snapshots.write_now(self.sequences)  # warns if it cannot
            finally:
                try:
                    self.journal.close_partition(self.name)
                finally:
                    self.log.close()
        self._wake_fetchers()
