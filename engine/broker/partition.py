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

In a cluster both logs are replicated, co-led (one leader, one ISR, one epoch;
CLUSTER.md §3.3, §3.4): a transactional batch is acknowledged once its ENTRY is
committed and applied (J2), the copier waits for the copy's replication before
MARK_APPLIED (J4), followers apply only committed records and never copy (J1, J5),
and a new leader writes, copies and decides nothing until its in-sync replicas hold
both logs as it held them at promotion (the promotion barrier); its first write then
finishes a half-done copy (J6).

Fetch is a long poll: a reader waits on ``data_arrived`` until enough bytes
lie past its offset or its wait runs out. Consumers read below the high
watermark only (``high_watermark``); on one node it follows the log end, moved
after each append by the thread that made it.

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
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from twinlog.copier import PartitionWriter
from twinlog.engine.base.errors import (
    DiskFullError,
    InvalidTxnStateError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    TwinlogError,
    UnknownTransactionError,
)
from twinlog.engine.base.types import (
    FetchResult,
    ProducerDescription,
    ProduceResult,
    TopicPartition,
)
from twinlog.engine.broker.partition_epochs import PartitionEpochs
from twinlog.engine.broker.partition_role import (
    NO_ROLE,
    SOLE,
    PartitionRole,
    Role,
    Transition,
    next_role,
)
from twinlog.engine.broker.producer_state import SequenceTracker
from twinlog.engine.broker.send_gate import SendGate
from twinlog.engine.broker.transaction_gate import GateEntry, TransactionGate
from twinlog.engine.log import CompactionReport, DataLog, LogConfig, compact
from twinlog.engine.log.high_watermark import HighWatermark, batches_below
from twinlog.engine.log.leader_epochs import NO_EPOCH
from twinlog.engine.records.batch_format import NO_PRODUCER_ID, BatchHeader, read_header
from twinlog.engine.records.batch_reader import split_batches
from twinlog.engine.replication.divergence import diverging_epoch, truncation_offset
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    LogKind,
    ReplicaFetchPartition,
)
from twinlog.engine.replication.replica_set import IsrChange, ReplicaSet
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.engine.transactions.partition_calls import (
    CallEpochs,
    RegisterPartition,
    TransactionCoordinators,
    coordinator_partition_of,
)
from twinlog.journal import CopyState, JournalLogs

log = logging.getLogger(__name__)


class Partition:
    def __init__(
        self,
        topic_partition: TopicPartition,
        directory: Path,
        config: LogConfig,
        journal: JournalLogs,
        coordinators: TransactionCoordinators | None = None,
        replication: ReplicationSettings | None = None,
    ) -> None:
        """``replication``: a cluster broker's settings; None for the single-node broker
        (role SOLE). A cluster partition starts with no role and serves nothing until
        ``take_role`` (``partition_role``)."""
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
                wait_committed=None if replication is None else self._wait_journal_committed,
            )
        except BaseException:
            self.log.close()
            raise
        self.writer = PartitionWriter(
            self.name,
            self.log,
            journal,
            wait_replicated=None if replication is None else self._wait_copy_replicated,
        )
        if replication is None:
            try:
                self.writer.recover()
            except DiskFullError as error:
                # A torn copy is cut by now (that needs no space); the writer finishes the
                # copy before its next write, once space returns. Reads are served meanwhile.
                log.warning("%s: finishing a copy deferred: %s", self.name, error)
        # A cluster replica recovers its copies only once it leads and has passed the
        # promotion barrier (J5: followers never decide; J6: resume on promotion).
        # A copy recovery could not finish (a full disk) leaves part of a transaction in the
        # log: it stays below the high watermark's reach until the copy is done.
        # In a cluster a restarted replica's log may end in what no other replica holds:
        # nothing is readable until the in-sync replicas say so (Kafka checkpoints the HW;
        # this starts from the log start and catches up at the first fetches).
        start_below = self._applying_start_offset()
        if replication is not None:
            start_below = self.log.log_start_offset
        self.high_watermark = HighWatermark(self.log, directory, start_below=start_below)
        self.replication = replication
        self.role: PartitionRole = SOLE if replication is None else NO_ROLE
        self.replicas: ReplicaSet | None = None  # while LEADER
        # While LEADER and not yet through the promotion barrier: each log's end at
        # promotion, which the in-sync replicas must hold before this leader acts.
        self._promotion_ends: dict[LogKind, int] | None = None
        # The newest leader epoch asked for, set before a role change takes the lock:
        # writers waiting for their replicas give up at once instead of holding it back.
        self._asked_epoch = -1
        self._plain_lock = threading.Lock()
        self.send_gate = SendGate(self.name)
        self.transaction_gate = TransactionGate(self.name)
        self.epochs = PartitionEpochs(self.name, self.log)
        self.coordinators = coordinators  # None: no coordinator to register with (tools)
        self.data_arrived = threading.Condition()
        if replication is None:  # a cluster's followers advance the watermark as they fetch
            self.writer.on_copied = self._publish_copied  # from here on (not in recovery)
        self.sequences = self._load_sequences()
        # (transaction id, attempt) -> sequences of its batches on this partition
        self.transaction_sequences: dict[tuple[int, str], SequenceTracker] = {}

    def _load_sequences(self) -> SequenceTracker:
        """Rebuild idempotence state: snapshot (if any, and not past the log end) + log tail."""
        tracker, scan_from = SequenceTracker.read_snapshot(self.directory)
        if scan_from > self.log.log_end_offset or scan_from < self.log.log_start_offset:
            tracker, scan_from = SequenceTracker(), self.log.log_start_offset
        (self.directory / "producer-state.json").unlink(missing_ok=True)
        if scan_from < self.log.log_end_offset:
            for header in self.log.iter_headers(scan_from):
                tracker.observe(header, header.base_offset)
        return tracker

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
                self._advance_high_watermark()
                result = ProduceResult(base_offset)
        self._wake_fetchers()
        if replicas is not None:
            self._wait_replicated(
                LogKind.DATA, result.base_offset + header.last_offset_delta + 1, role
            )
        return result

    def append_as_leader(self, batch: bytes, leader_epoch: int) -> tuple[int, int]:
        """A broker-internal write (the transaction journal, CLUSTER.md §3.5): appended only
        while this broker leads at ``leader_epoch`` (a coordinator never writes into a later
        epoch than the one it loaded) with enough replicas in sync; nothing is written when
        it raises. Returns (base offset, end offset) for ``wait_acknowledged``."""
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
            base_offset = self.writer.append_plain(batch, validate=False)
            self._advance_high_watermark()
        self._wake_fetchers()
        return base_offset, base_offset + read_header(batch).last_offset_delta + 1

    def wait_acknowledged(self, end_offset: int, leader_epoch: int) -> None:
        """Until the in-sync replicas hold the data log below ``end_offset`` (raises when
        leadership of ``leader_epoch`` is lost or ``replica_ack_timeout_ms`` passes: the
        write may or may not be kept)."""
        role = self.role
        if role.role is not Role.LEADER or role.leader_epoch != leader_epoch:
            raise NotLeaderOrFollowerError(
                f"{self.name}: led at epoch {leader_epoch} no longer; the write below offset "
                f"{end_offset} may or may not be kept"
            )
        self._wait_replicated(LogKind.DATA, end_offset, role)

    def wait_committed_to_end(self, leader_epoch: int) -> int:
        """A leader loading its state from its own log (a coordinator): through the
        promotion barrier, then until the in-sync replicas hold all of it; the log end,
        below which everything is committed. Raises as ``wait_acknowledged``."""
        self._wait_promoted()
        end_offset = self.log.log_end_offset
        self.wait_acknowledged(end_offset, leader_epoch)
        return end_offset

    def _check_enough_in_sync(self, replicas: ReplicaSet | None) -> None:
        if replicas is not None and not replicas.enough_in_sync():
            raise NotEnoughReplicasError(
                f"{self.name}: {len(replicas.isr)} in-sync replica(s) "
                f"{sorted(replicas.isr)}, below min_insync_replicas "
                f"{replicas.min_insync_replicas}; nothing was written: retry when the "
                "replicas are back"
            )

    def _high_watermark_of(self, kind: LogKind) -> int:
        if kind is LogKind.DATA:
            return self.high_watermark.value
        return self.journal.high_watermark(self.name)

    def _wait_replicated(self, kind: LogKind, end_offset: int, role: PartitionRole) -> None:
        """Until the ``kind`` log's high watermark reaches ``end_offset`` with enough
        replicas in sync (Kafka's checkEnoughReplicasReachOffset), this broker stays
        leader of ``role``'s epoch, and ``ack_timeout_ms`` lasts."""
        assert self.replication is not None
        deadline = time.monotonic() + self.replication.ack_timeout_ms / 1000
        what = "batch" if kind is LogKind.DATA else "journal-log record"
        with self.data_arrived:
            while True:
                replicas = self.replicas
                if self.role != role or replicas is None or self._asked_epoch > role.leader_epoch:
                    raise NotLeaderOrFollowerError(
                        f"{self.name}: leadership moved (now {self.role.role.value}, epoch "
                        f"{max(self.role.leader_epoch, self._asked_epoch)}) before the in-sync "
                        f"replicas acknowledged the {what}; it may or may not be kept: retry "
                        "at the new leader (an idempotent retry is never written twice)"
                    )
                high_watermark = self._high_watermark_of(kind)
                if high_watermark >= end_offset:
                    if replicas.enough_in_sync():
                        return
                    raise NotEnoughReplicasAfterAppendError(
                        f"{self.name}: the {what} is replicated, but only to "
                        f"{sorted(replicas.isr)}, below min_insync_replicas "
                        f"{replicas.min_insync_replicas}; retry (never written twice)"
                    )
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    raise NotEnoughReplicasAfterAppendError(
                        f"{self.name}: the in-sync replicas {sorted(replicas.isr)} did not "
                        f"acknowledge {kind.value}-log offset {end_offset - 1} within "
                        f"{self.replication.ack_timeout_ms} ms (high watermark "
                        f"{high_watermark}); it may or may not be kept: retry (never "
                        "written twice)"
                    )
                self.data_arrived.wait(remaining_s)

    def _wait_journal_committed(self, end_offset: int) -> None:
        """The journal log's wait (``JournalLogs``): the record below ``end_offset`` is held
        by the in-sync replicas (J2)."""
        self._wait_own_write(LogKind.JOURNAL, end_offset)

    def _wait_copy_replicated(self, end_offset: int) -> None:
        """The copier's wait before MARK_APPLIED (J4): the copy is on the in-sync replicas."""
        self._wait_own_write(LogKind.DATA, end_offset)

    def _wait_own_write(self, kind: LogKind, end_offset: int) -> None:
        """This leader wrote the ``kind`` log up to ``end_offset``: tell the followers, then
        wait for them."""
        role = self.role
        if role.role is not Role.LEADER:
            self.check_serves_clients()
            raise NotLeaderOrFollowerError(f"{self.name}: this broker no longer leads it")
        self._advance_high_watermark()
        self._wake_fetchers()
        self._wait_replicated(kind, end_offset, role)

    def _wait_promoted(self) -> None:
        """A new leader acts only once its in-sync replicas hold both logs as it held them
        at promotion (the promotion barrier, Raft's "commit an entry of your own term"):
        then everything it holds is committed, and it may finish copies and decide."""
        ends = self._promotion_ends
        if ends is None:
            return
        assert self.replication is not None
        role = self.role
        deadline = time.monotonic() + self.replication.ack_timeout_ms / 1000
        self._wake_fetchers()
        with self.data_arrived:
            while True:
                ends = self._promotion_ends
                if ends is None:
                    return
                if self.role != role:
                    break
                if all(self._high_watermark_of(kind) >= end for kind, end in ends.items()):
                    # Everything held at promotion is committed: LMDB applies it before the
                    # leader reads its state (sequences, counts, the copier's recovery).
                    self.journal.wait_applied()
                    self._promotion_ends = None
                    log.info("%s: through the promotion barrier at %s", self.name, ends)
                    return
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    break
                self.data_arrived.wait(min(remaining_s, 0.1))
        self.check_serves_clients()
        raise NotLeaderOrFollowerError(
            f"{self.name}: leader since epoch {role.leader_epoch}, waiting for its in-sync "
            f"replicas to hold what it held at promotion ({ends}) before it writes, copies or "
            "decides; retry shortly"
        )

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
    ) -> ProduceResult:
        """Journal a batch of an open transaction, registering this partition with the
        transaction's coordinator first if it is the transaction's first batch here.

        Sequences are checked per (transaction, attempt): every task attempt of a
        Spark job numbers its own batches from 0. ``sender``: (producer id, generation)
        when the batch does not carry them (the broker's own group offsets batch).
        """
        self.check_serves_clients()
        self._wait_promoted()
        self._check_enough_in_sync(self.replicas)
        # never into the journal of a topic being deleted, nor of a counted transaction
        with self.send_gate.send(), self.transaction_gate.appending(transaction_id) as gate:
            self._register(
                transaction_id, sender or (header.producer_id, header.producer_generation), gate
            )
            tracker = self._transaction_tracker(transaction_id, attempt)
            where = f"{self.name} in transaction {transaction_id}"
            check = tracker.check(header, f"{where} attempt {attempt!r}" if attempt else where)
            if check.duplicate:
                if self.replicas is not None and check.base_offset >= 0:
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

            def on_appended(journal_offset: int) -> None:
                tracker.observe(header, journal_offset)
                observed.append(journal_offset)

            self.journal.append(
                self.name,
                transaction_id,
                batch,
                producer_id=header.producer_id,
                producer_generation=header.producer_generation,
                base_sequence=header.base_sequence,
                attempt=attempt.encode("utf-8"),
                on_appended=on_appended if self.replicas is not None else None,
            )
            if not observed:
                tracker.observe(header, -1)
        return ProduceResult(-1)

    def register_transaction(self, transaction_id: int, sender: tuple[int, int]) -> None:
        """Register this partition with the transaction's coordinator, writing nothing
        here yet: the broker's own offsets batch checks its transaction (``sender``:
        producer id, generation) before it fences the offsets' other holders."""
        self.check_serves_clients()
        self._wait_promoted()
        with self.send_gate.send(), self.transaction_gate.appending(transaction_id) as gate:
            self._register(transaction_id, sender, gate)

    def _register(self, transaction_id: int, sender: tuple[int, int], gate: GateEntry) -> None:
        """Ask the coordinator on the transaction's first batch here, and on any batch
        while it is frozen; check the others against what it accepted (Kafka's KIP-890:
        verified once, cached)."""
        frozen_at = self.transaction_gate.frozen_at(gate)
        if gate.registered == sender and frozen_at is None:
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
                RegisterPartition(transaction_id, self.topic_partition, *sender, epochs)
            )
        gate.registered = sender
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
        tags = None if attempts is None else [a.encode("utf-8") for a in attempts]
        self._check_leads()
        self.transaction_gate.freeze(transaction_id)  # no append may race the copy
        try:
            first_offset, next_offset = self.writer.apply_commit(
                transaction_id, attempts=tags, journaled_entries=journaled_entries
            )
        finally:
            # Prepared, the coordinator refuses the transaction's later batches itself.
            self.transaction_gate.forget(transaction_id)
        self._advance_high_watermark()
        self._forget_transaction(transaction_id)
        self._wake_fetchers()
        return first_offset, next_offset

    def apply_abort(self, transaction_id: int) -> None:
        self._check_leads()
        self.transaction_gate.freeze(transaction_id)  # appends in progress land, then go
        try:
            self.writer.apply_abort(transaction_id)
        finally:
            self.transaction_gate.forget(transaction_id)
        self._forget_transaction(transaction_id)

    def compact_log(self, should_stop: Callable[[], bool] | None = None) -> CompactionReport:
        """Compact the data log (cleanup.policy compact), leaving alone the batches of a copy
        not yet recorded as APPLIED: the copier's crash recovery recognises them in the log
        by every header field, which compaction would change."""
        return compact(
            self.log, protected_from_offset=self._applying_start_offset, should_stop=should_stop
        )

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Size and age retention, never deleting a segment that holds a batch of a copy not
        yet recorded as APPLIED (the bound compaction gets): the copier's retry of that
        record recognises the copy in the log, from its first batch."""
        deleted = self.log.apply_retention(now_ms, protected_from_offset=self._retention_bound)
        # The journal log keeps what an open or applying transaction, or a replay, needs.
        self.journal.apply_retention(self.name)
        return deleted

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

    # --- roles and replication in a cluster (partition_role, engine.replication) --------

    def _check_leads(self) -> None:
        """A coordinator's call: only the leader (through its barrier) counts, copies or
        drops a transaction's entries; a follower never decides (J5)."""
        self.check_serves_clients()
        self._wait_promoted()

    def check_serves_clients(self) -> None:
        role = self.role
        if not role.serves_clients:
            leader = f"broker {role.leader_id}" if role.leader_id >= 0 else "not known yet"
            raise NotLeaderOrFollowerError(
                f"{self.name}: this broker is not its leader (it is {role.role.value} at "
                f"leader epoch {role.leader_epoch}; leader: {leader}); refresh metadata and "
                "send to the leader (a client given one broker's address talks to that broker "
                "only: give it the cluster's bootstrap list, 'h1:p1,h2:p2', or 'h1:p1,')"
            )

    def take_role(
        self, asked: PartitionRole, replicas: tuple[int, ...], isr: Mapping[int, int], now_ms: int
    ) -> Transition:
        """Become what the cluster's metadata says (``partition_role.next_role``'s table).

        A new leader's epoch starts at its log end (recorded in the epoch checkpoint, so
        followers that hold more of an older epoch truncate to it: KIP-279's fix). A
        leader that steps down stops taking writes at once; produce calls waiting for
        their acknowledgement fail with NotLeaderOrFollowerError.
        """
        settings = self.replication
        assert settings is not None, f"{self.name}: a single-node partition takes no role"
        if asked.leader_epoch > self._asked_epoch:
            self._asked_epoch = asked.leader_epoch
            self._wake_fetchers()  # waiting writers of the old epoch let go of the locks
        with self._plain_lock:
            transition = next_role(self.role, asked)
            if transition is Transition.LEAD:
                self.epochs.become_leader(asked.leader_epoch)
                self.journal.become_leader(self.name, asked.leader_epoch)
                ends = {
                    LogKind.DATA: self.log.log_end_offset,
                    LogKind.JOURNAL: self.journal.journal_log(self.name).log_end_offset,
                }
                self.replicas = ReplicaSet(
                    self.name,
                    settings.broker_id,
                    replicas,
                    isr,
                    min_insync_replicas=settings.min_insync_replicas,
                    lag_time_max_ms=settings.lag_time_max_ms,
                    now_ms=now_ms,
                    epoch_start_offsets=ends,
                )
                self._promotion_ends = ends
                self.writer.recover_before_next_write()  # J6, after the barrier
                self.transaction_sequences.clear()  # rebuilt from what is committed
                self.role = asked
            elif transition is Transition.UPDATE:
                assert self.replicas is not None
                self.replicas.confirm(isr)
            elif transition is Transition.FOLLOW:
                self.replicas = None
                self._promotion_ends = None
                self.journal.step_down(self.name)
                self.transaction_sequences.clear()
                self.role = asked
            if transition is not Transition.IGNORE:
                self._advance_high_watermark()
        if transition is not Transition.IGNORE:
            log.info(
                "%s: %s (leader %d, epoch %d, ISR %s)",
                self.name,
                transition.value,
                asked.leader_id,
                asked.leader_epoch,
                sorted(isr),
            )
            self._wake_fetchers()
        return transition

    def _replicated_log(self, kind: LogKind) -> DataLog:
        return self.log if kind is LogKind.DATA else self.journal.journal_log(self.name)

    def replica_read(
        self,
        replica_id: int,
        broker_epoch: int,
        request: ReplicaFetchPartition,
        max_bytes: int,
        now_ms: int,
    ) -> FetchedPartition:
        """The leader's answer to a follower's fetch of one of its logs: batches from its
        fetch offset (past the high watermark too: followers copy everything), or where
        their logs part. The fetch offset acknowledges everything below it."""
        topic_partition, kind = self.topic_partition, request.log
        role, replicas = self.role, self.replicas
        try:
            if role.role is not Role.LEADER or replicas is None:
                self.check_serves_clients()
                raise NotLeaderOrFollowerError(f"{self.name}: this broker is not a leader")
            self.epochs.check_leader_epoch(request.current_leader_epoch)
            replicated = self._replicated_log(kind)
            start, end = replicated.log_start_offset, replicated.log_end_offset
            if kind is LogKind.DATA and request.fetch_offset < start:
                # What follows the follower's log end is gone here (retention, a coordinator's
                # checkpoint): it restarts empty at our log start (apply_fetched), as Kafka's
                # follower does on OFFSET_OUT_OF_RANGE. Not an acknowledgement of anything.
                return FetchedPartition(
                    topic_partition, b"", self._high_watermark_of(kind), start, end, log=kind
                )
            diverging = diverging_epoch(
                replicated.epochs, start, end, request.fetch_offset, request.last_fetched_epoch
            )
            if diverging is not None:
                return FetchedPartition(
                    topic_partition,
                    b"",
                    self._high_watermark_of(kind),
                    start,
                    end,
                    diverging,
                    log=kind,
                )
            if not start <= request.fetch_offset <= end:
                raise OffsetOutOfRangeError(
                    f"{self.name}: follower {replica_id} fetches its {kind.value} log at "
                    f"{request.fetch_offset}, the leader holds [{start}, {end}]; a follower "
                    "behind the log start must be rebuilt (remove its copy of the partition)",
                    start,
                    end,
                )
            replicas.record_fetch(
                replica_id, broker_epoch, request.fetch_offset, end, now_ms, log=kind
            )
            before = self._high_watermark_of(kind)
            self._advance_high_watermark()
            if self._high_watermark_of(kind) != before:
                self._wake_fetchers()  # producers waiting for their acknowledgement
            records = (
                replicated.read(request.fetch_offset, max_bytes)
                if request.fetch_offset < end
                else b""
            )
            return FetchedPartition(
                topic_partition, records, self._high_watermark_of(kind), start, end, log=kind
            )
        except TwinlogError as error:  # per partition: the fetch goes on for the others
            return FetchedPartition(
                topic_partition, error=type(error).__name__, message=str(error), log=kind
            )

    def replica_fetch_positions(self) -> list[ReplicaFetchPartition]:
        """Where this follower fetches each log next (none: it follows nobody)."""
        role = self.role
        if role.role is not Role.FOLLOWER:
            return []
        positions = []
        for kind in LogKind:
            replicated = self._replicated_log(kind)
            last = replicated.last_batch_header()
            positions.append(
                ReplicaFetchPartition(
                    self.topic_partition,
                    replicated.log_end_offset,
                    NO_EPOCH if last is None else last.partition_leader_epoch,
                    role.leader_epoch,
                    log=kind,
                )
            )
        return positions

    def apply_fetched(self, fetched: FetchedPartition, leader_id: int) -> None:
        """A follower takes its leader's answer for one log: cut where the logs part, or
        append the batches as they are (fsynced with ``replica_fsync``: the next fetch
        offset acknowledges them) and learn the high watermark; the journal log's
        committed records are applied to LMDB then (J1), and only those.

        An answer from a broker this partition no longer follows, or to a fetch from
        before a cut (its batches do not start at the log end), is dropped. A late answer
        of the same leader from an older epoch is safe to take: that leader's log held it,
        and if it cut it since, the next fetch's epoch check cuts it here too (KIP-320);
        the high watermark it brings covered only what was committed then."""
        assert self.replication is not None
        with self._plain_lock:
            role = self.role
            if role.role is not Role.FOLLOWER or role.leader_id != leader_id:
                return
            if fetched.error:
                return
            if fetched.log is LogKind.JOURNAL:
                self._apply_fetched_journal(fetched)
                return
            if fetched.diverging is not None:
                end = self.log.log_end_offset
                cut = truncation_offset(self.log.epochs, end, fetched.diverging)
                self._truncate_follower(cut)
                return
            if not fetched.records and fetched.log_start_offset > self.log.log_end_offset:
                self._restart_at(fetched.log_start_offset)
                return
            if fetched.records:
                if read_header(fetched.records).base_offset != self.log.log_end_offset:
                    return  # an answer to an older fetch offset
                self.log.append_as_follower(
                    split_batches(fetched.records), sync=self.replication.replica_fsync
                )
                for view in split_batches(fetched.records):
                    header = read_header(view)
                    self.sequences.observe(header, header.base_offset)
            self.high_watermark.advance_to(min(fetched.high_watermark, self.log.log_end_offset))
        self._wake_fetchers()

    def _apply_fetched_journal(self, fetched: FetchedPartition) -> None:
        """``apply_fetched`` for the journal log (under the partition's lock)."""
        assert self.replication is not None
        journal_log = self.journal.journal_log(self.name)
        if fetched.diverging is not None:
            end = journal_log.log_end_offset
            cut = truncation_offset(journal_log.epochs, end, fetched.diverging)
            if cut < end:
                log.warning(
                    "%s: truncating journal-log records %d..%d, which the leader does not hold",
                    self.name,
                    cut,
                    end,
                )
                self.journal.truncate(self.name, cut)
            return
        if fetched.records:
            if read_header(fetched.records).base_offset != journal_log.log_end_offset:
                return  # an answer to an older fetch offset
            self.journal.append_replicated(
                self.name, split_batches(fetched.records), sync=self.replication.replica_fsync
            )
        # J1: LMDB applies what the leader says is committed, before the next fetch
        # (a failed application raises to the fetcher and is queued again next time).
        self.journal.commit_to(self.name, fetched.high_watermark, wait=True)

    def _restart_at(self, leader_log_start_offset: int) -> None:
        """The leader no longer holds what follows this replica's log end: drop the whole
        log and start empty at the leader's log start (Kafka's truncateFullyAndStartAt);
        the fetcher then copies from there. Producer state is rebuilt from what comes."""
        log.warning(
            "%s: this replica ends at %d, below its leader's log start %d: dropping its "
            "log and restarting at %d",
            self.name,
            self.log.log_end_offset,
            leader_log_start_offset,
            leader_log_start_offset,
        )
        self.log.truncate_fully_and_start_at(leader_log_start_offset)
        self.high_watermark.advance_to(leader_log_start_offset)
        self.sequences = self._load_sequences()

    def _truncate_follower(self, offset: int) -> None:
        """Cut what this replica holds and its leader does not (KIP-101): the idempotence
        state is rebuilt from what stays."""
        if offset < self.log.log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self.name}: the logs part at {offset}, below this replica's log start "
                f"{self.log.log_start_offset}; remove this replica's copy to rebuild it",
                self.log.log_start_offset,
                self.log.log_end_offset,
            )
        if offset < self.log.log_end_offset:
            log.warning(
                "%s: truncating %d..%d, which the leader does not hold",
                self.name,
                offset,
                self.log.log_end_offset,
            )
            self.high_watermark.truncate_to(min(self.high_watermark.value, offset))
            self.log.truncate_to(offset)
            self.sequences = self._load_sequences()

    def isr_change_due(self, now_ms: int, registered_epochs: Mapping[int, int]) -> IsrChange | None:
        """The ISR this leader should write now (KIP-497), marked as proposed; None if none."""
        replicas = self.replicas
        if replicas is None:
            return None
        high_watermarks = {kind: self._high_watermark_of(kind) for kind in LogKind}
        change = replicas.isr_change_due(now_ms, high_watermarks, registered_epochs)
        if change is not None:
            replicas.propose(change)
            with self._plain_lock:
                self._advance_high_watermark()
        return change

    def isr_change_done(self, isr: Mapping[int, int] | None) -> None:
        """The proposed ISR was written (``isr``) or not (None: it stays as it was)."""
        replicas = self.replicas
        if replicas is None:
            return
        if isr is None:
            replicas.abandon()
        else:
            replicas.confirm(isr)
        with self._plain_lock:
            self._advance_high_watermark()
        self._wake_fetchers()

    # --- high watermark ----------------------------------------------------------------

    def replicated_end(self) -> int:
        """The offset below which every in-sync replica holds the log: on one node, the
        log end; on a cluster leader, what its maximal ISR holds; a follower learns it from
        its leader (``apply_fetched``). Tests hold it back."""
        if self.role.role is Role.SOLE:
            return self.log.log_end_offset
        replicas = self.replicas
        if self.role.role is Role.LEADER and replicas is not None:
            return replicas.high_watermark_candidate(self.log.log_end_offset)
        return self.high_watermark.value

    def _advance_high_watermark(self) -> None:
        self.high_watermark.advance_to(self.replicated_end())
        replicas = self.replicas
        if self.role.role is Role.LEADER and replicas is not None:
            # The journal log's: its records below it are committed, and go to LMDB (J1).
            journal_end = self.journal.journal_log(self.name).log_end_offset
            candidate = replicas.high_watermark_candidate(journal_end, LogKind.JOURNAL)
            if candidate > self.journal.high_watermark(self.name):
                self.journal.commit_to(self.name, candidate)

    # --- reads -----------------------------------------------------------------------

    def _publish_copied(self) -> None:
        """A copy is durable in the data log (its APPLIED record comes next): readers
        waiting for it are woken now, a journal sync before apply_commit returns."""
        self._advance_high_watermark()
        self._wake_fetchers()

    def _wake_fetchers(self) -> None:
        with self.data_arrived:
            self.data_arrived.notify_all()
        if self.replication is not None:
            self.replication.on_data()

    def fetch(
        self, offset: int, max_bytes: int, max_wait_ms: int = 0, min_bytes: int = 1
    ) -> FetchResult:
        """Whole batches from ``offset`` below the high watermark; waits up to ``max_wait_ms``
        for ``min_bytes``. The result's end is the high watermark, not the log end."""
        self.check_serves_clients()
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000
        while True:
            start, end = self.log.log_start_offset, self.high_watermark.value
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
            remaining_s = deadline - time.monotonic()
            if len(records) >= min_bytes or remaining_s <= 0:
                return FetchResult(records, start, end)
            with self.data_arrived:
                if self.high_watermark.value == end:
                    self.data_arrived.wait(remaining_s)

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

    def close(self) -> None:
        with self._plain_lock:
            try:
                self.log.flush()
                try:
                    self.sequences.write_snapshot(self.directory, self.log.log_end_offset)
                except DiskFullError as error:  # an optimisation: the log is the truth
                    log.warning(
                        "%s: producer state snapshot not written (%s); the next open rebuilds "
                        "it from the log",
                        self.name,
                        error,
                    )
            finally:
                try:
                    self.journal.close_partition(self.name)
                finally:
                    self.log.close()
        self._wake_fetchers()
