"""A partition as a replica: its role, the leader's side and the follower's side of
replication, the high watermark (CLUSTER.md §3.3, §3.4; ``engine.replication``).

``PartitionReplica`` is the half of ``Partition`` that replication drives; ``partition``
holds the other half (appends, the transactions' journal entries, copies, reads). They
share one state, declared below and set by ``Partition.__init__``:

    role            NO_ROLE at open, then what the cluster says (``take_role``:
                    ``partition_role``'s table); one node is a cluster of one, whose sole
                    member makes every partition LEADER with ISR {itself}
    replicas        the leader's view of its followers (``ReplicaSet``); None unless LEADER
    _promotion_ends while LEADER and not yet through the promotion barrier: each log's end
                    at promotion, which the in-sync replicas must hold before it acts
    _asked_epoch    the newest leader epoch asked for, set before a role change takes the
                    lock, so writers waiting for their replicas give up at once

On a leader, a write waits for its in-sync replicas (``_wait_replicated``: acks=all,
J2, J4) and nothing is written, copied or decided before the promotion barrier
(``_wait_promoted``). A follower appends what its leader sends as it is
(``apply_fetched``), cuts where their logs part (KIP-101/279/320), and applies to LMDB
only the journal-log records its leader says are committed (J1).

Thread rule: as ``Partition``'s. ``take_role`` comes from the cluster member's thread,
``replica_read`` from the replication service's threads, ``apply_fetched`` and
``replica_fetch_positions`` from the follower's fetcher threads; role, replicas and the
logs change under ``_plain_lock``; waiters sleep on ``data_arrived``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from twinlog.copier import PartitionWriter
from twinlog.engine.base.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.partition_epochs import PartitionEpochs
from twinlog.engine.broker.partition_role import (
    PartitionRole,
    Role,
    Transition,
    next_role,
)
from twinlog.engine.broker.producer_snapshots import ProducerSnapshots
from twinlog.engine.broker.producer_state import SequenceTracker
from twinlog.engine.broker.promotion_recoveries import PromotionRecoveries
from twinlog.engine.broker.reassignments import ReplicaProgress
from twinlog.engine.log import DataLog
from twinlog.engine.log.high_watermark import HighWatermark
from twinlog.engine.log.leader_epochs import NO_EPOCH
from twinlog.engine.records.batch_format import read_header
from twinlog.engine.records.batch_reader import split_batches
from twinlog.engine.replication.divergence import diverging_epoch, truncation_offset
from twinlog.engine.replication.fetch_calls import (
    FetchedPartition,
    LogKind,
    ReplicaFetchPartition,
    new_leadership_key,
)
from twinlog.engine.replication.fetch_throttle import FetchThrottle
from twinlog.engine.replication.replica_set import UNKNOWN_OFFSET, IsrChange, ReplicaSet
from twinlog.engine.replication.replication_settings import ReplicationSettings
from twinlog.journal import JournalLogs

log = logging.getLogger(__name__)

PROMOTION_POLL_S = 0.1  # a new leader re-reads its replicas' progress at least this often


class PartitionReplica:
    # The state both halves share (set by ``Partition.__init__``).
    name: str
    topic_partition: TopicPartition
    log: DataLog
    journal: JournalLogs
    writer: PartitionWriter  # the copier: a new leader finishes a half-done copy (J6)
    fetch_throttle: FetchThrottle | None = None  # a follower's copy limit (a reassignment's)
    replication: ReplicationSettings
    _unfinished_copy_from: int | None  # while LEADER: a half-done copy's start (unread)
    role: PartitionRole
    replicas: ReplicaSet | None
    _promotion_ends: dict[LogKind, int] | None
    # told of each promotion, so that a leader no write reaches recovers too (None: no one)
    promotion_recoveries: PromotionRecoveries | None = None
    closed: bool  # set first by ``Partition.close``
    _asked_epoch: int
    _plain_lock: threading.Lock
    _watermark_lock: threading.Lock  # see ``Partition.__init__``
    epochs: PartitionEpochs
    data_arrived: threading.Condition
    high_watermark: HighWatermark
    sequences: SequenceTracker
    producer_snapshots: ProducerSnapshots
    transaction_sequences: dict[tuple[int, str], SequenceTracker]

    def _load_sequences(self) -> SequenceTracker:
        raise NotImplementedError  # Partition's: idempotence state from the log

    def _applying_start_offset(self) -> int | None:
        raise NotImplementedError  # Partition's: the first offset of a copy not yet APPLIED

    # --- roles (partition_role) ---------------------------------------------------

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

    def _check_leads(self) -> None:
        """A coordinator's call: only the leader (through its barrier) counts, copies or
        drops a transaction's entries; a follower never decides (J5)."""
        self.check_serves_clients()
        self._wait_promoted()

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
                    min_insync_replicas=self.log.config.min_insync_replicas,
                    lag_time_max_ms=settings.lag_time_max_ms,
                    now_ms=now_ms,
                    epoch_start_offsets=ends,
                )
                self._promotion_ends = ends
                self.writer.recover_before_next_write()  # J6, after the barrier
                # Readers stay below a copy a killed process left torn until then.
                self._unfinished_copy_from = self.log.unfinished_append_from
                self.transaction_sequences.clear()  # rebuilt from what is committed
                self.role = asked
                if self.promotion_recoveries is not None:
                    self.promotion_recoveries.promoted(self)
            elif transition is Transition.UPDATE:
                assert self.replicas is not None
                self.replicas.confirm(isr)
            elif transition is Transition.FOLLOW:
                # First: a copy or write of this broker's earlier term still in flight must
                # not land in the log from now on (DataLog's follower fence).
                self.epochs.become_follower()
                self.replicas = None
                self._unfinished_copy_from = None
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
        if transition is Transition.LEAD:
            for broker_id in replicas:
                if broker_id != settings.broker_id:
                    self.replication.long_poll.wake(new_leadership_key(broker_id))
        return transition

    # --- the leader's waits for its in-sync replicas ------------------------------

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

    def _committed_end_of(self, kind: LogKind) -> int:
        """What the in-sync replicas hold of ``kind``'s log, as far as this leader knows:
        the data log's high watermark; the journal log's may trail it (``applicable_end``)."""
        if kind is LogKind.DATA:
            return self.high_watermark.value
        return self.journal.applicable_end(self.name)

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

    def _wait_replicated(self, kind: LogKind, end_offset: int, role: PartitionRole) -> None:
        """Until the ``kind`` log's high watermark reaches ``end_offset`` with enough
        replicas in sync (Kafka's checkEnoughReplicasReachOffset), this broker stays
        leader of ``role``'s epoch, and ``ack_timeout_ms`` lasts."""
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

    def _has_followers(self) -> bool:
        """Does this leader replicate to other brokers? (the copier's choice of marks
        beside the copy: with none, nothing would travel in the round it saves)."""
        replicas = self.replicas
        return replicas is not None and len(replicas.replicas) > 1

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

    def recover_after_promotion(self) -> bool:
        """The broker's background round (``promotion_recoveries``): once this leader is
        through its promotion barrier, finish the copies an earlier term left (J6) if no
        write or APPLY has yet. True once nothing is left to do here (recovered, or no
        longer the leader, or closed); False while the in-sync replicas are behind the
        barrier. A step-down meanwhile makes the recovery's writes fail (a follower's
        journal log takes none): NotLeaderOrFollowerError, which the round takes as done."""
        role = self.role
        if self.closed or not role.serves_clients:
            return True
        ends = self._promotion_ends
        if ends is not None and not self._through_barrier(ends):
            self._finish_journal_queueing()
            return False
        self._wait_promoted()  # through the barrier: marks it passed, LMDB applied
        if self.closed or self.role != role:
            return True  # closed, or stepped down (or promoted again: asked anew) meanwhile
        self.writer.recover_if_needed()
        return True

    def _journal_queueing_behind(self) -> bool:
        """Does the journal log's high watermark trail what is committed (its last
        ``commit_to`` failed part way: LMDB refused a record in a bounded replay's wait)?
        The next advance repairs it."""
        return self.journal.high_watermark(self.name) < self.journal.applicable_end(self.name)

    def _finish_journal_queueing(self) -> None:
        """A journal log whose queueing is behind (``_journal_queueing_behind``) stays so
        until the next advance; a leader no follower fetches from (replication factor 1,
        its followers down) gets none, and would stay behind its promotion barrier: the
        round asks for one."""
        if not self._journal_queueing_behind():
            return
        try:
            self._advance_high_watermark()
        except Exception as error:  # the next round tries again
            log.info("%s: the journal log's committed records not queued yet: %r", self.name, error)

    def _through_barrier(self, ends: dict[LogKind, int]) -> bool:
        """The in-sync replicas hold both logs up to their ends at promotion."""
        return all(self._high_watermark_of(kind) >= end for kind, end in ends.items())

    def _wait_promoted(self) -> None:
        """A new leader acts only once its in-sync replicas hold both logs as it held them
        at promotion (the promotion barrier, Raft's "commit an entry of your own term"):
        then everything it holds is committed, and it may finish copies and decide."""
        ends = self._promotion_ends
        if ends is None:
            return
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
                if self._through_barrier(ends):
                    # Everything held at promotion is committed: LMDB applies it before the
                    # leader reads its state (sequences, counts, the copier's recovery).
                    self.journal.wait_applied()
                    self._promotion_ends = None
                    log.info(
                        "%s: through the promotion barrier at %s",
                        self.name,
                        ", ".join(f"{kind.value} log {end}" for kind, end in ends.items()),
                    )
                    return
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    break
                self.data_arrived.wait(min(remaining_s, PROMOTION_POLL_S))
        self.check_serves_clients()
        raise NotLeaderOrFollowerError(
            f"{self.name}: leader since epoch {role.leader_epoch}, waiting for its in-sync "
            f"replicas to hold what it held at promotion ({ends}) before it writes, copies or "
            "decides; retry shortly"
        )

    # --- the leader's answers to its followers (engine.replication) ---------------

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
            if request.fetch_offset < start:
                # What follows the follower's log end is gone here (retention, a coordinator's
                # checkpoint; the journal log's segments no transaction needs): it restarts
                # empty at our log start (apply_fetched), as Kafka's follower does on
                # OFFSET_OUT_OF_RANGE. Not an acknowledgement of anything.
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
                    f"{request.fetch_offset}, the leader holds [{start}, {end}]",
                    start,
                    end,
                )
            moved = replicas.record_fetch(
                replica_id, broker_epoch, request.fetch_offset, end, now_ms, log=kind
            )
            # A fetch offset this leader already counted moves no high watermark: every
            # other input (this leader's appends, ISR changes) advances it where it changes.
            # Most of a round's logs are quiet, so this is most of a leader's answers. The
            # exception: a journal log whose last ``commit_to`` failed part way is finished
            # by the next advance, whatever calls it (``_finish_journal_queueing``).
            if moved or self._journal_queueing_behind():
                # Both logs': an advance may commit the other log too (another fetch's
                # record, counted by this round), and its writers wait for that wake.
                before = [self._high_watermark_of(each) for each in LogKind]
                self._advance_high_watermark()
                if [self._high_watermark_of(each) for each in LogKind] != before:
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

    def replica_read_both(
        self,
        replica_id: int,
        broker_epoch: int,
        requests: Sequence[ReplicaFetchPartition],
        max_bytes: Sequence[int],
        now_ms: int,
    ) -> list[FetchedPartition]:
        """``replica_read`` of each of this partition's logs a follower's fetch names (in
        their order), read so that a follower never holds a copy without its
        MARK_APPLYING: the data log first, then the journal log, and the data log's
        batches withheld (its answer kept, records dropped) unless the journal log's
        answer reaches the journal log's end as it was after the data log was read. A
        copy is appended after its marks are in the journal log (the copier,
        ``append_marks``), so those marks lie below that end; the follower appends the
        journal log's answer first (``PartitionManager.apply_replica_fetch``). A journal
        answer cut short (its byte cap), refused or parting withholds the data log's
        records for this round: the follower catches its journal log up first."""
        answers: dict[int, FetchedPartition] = {}
        data_first = sorted(range(len(requests)), key=lambda i: requests[i].log is LogKind.JOURNAL)
        journal_end_after_data: int | None = None
        for index in data_first:
            request = requests[index]
            if request.log is LogKind.JOURNAL and journal_end_after_data is None:
                journal_end_after_data = self.journal.journal_log(self.name).log_end_offset
            answers[index] = self.replica_read(
                replica_id, broker_epoch, request, max_bytes[index], now_ms
            )
        read = [answers[index] for index in range(len(requests))]
        journal_reached = max(
            (
                _answer_end(request.fetch_offset, answer)
                for request, answer in zip(requests, read, strict=True)
                if request.log is LogKind.JOURNAL
            ),
            default=-1,
        )
        if journal_end_after_data is not None and journal_reached >= journal_end_after_data:
            return read
        return [
            replace(answer, records=b"")
            if answer.log is LogKind.DATA and answer.records
            else answer
            for answer in read
        ]

    def isr_change_due(self, now_ms: int, registered_epochs: Mapping[int, int]) -> IsrChange | None:
        """The ISR this leader should write now (KIP-497), marked as proposed; None if none."""
        replicas = self.replicas
        if replicas is None:
            return None
        # Under the watermark lock: an advance from the old ISR between the check and the
        # proposal could move the high watermarks past what the follower being added
        # holds (records acknowledged that it lacks, lost if it were elected).
        with self._watermark_lock:
            # The committed ends, not the high watermarks: the journal log's may trail
            # what its ISR holds while ``commit_to`` queues it, and a follower joining
            # below what is committed could be elected without it.
            committed_ends = {kind: self._committed_end_of(kind) for kind in LogKind}
            change = replicas.isr_change_due(now_ms, committed_ends, registered_epochs)
            if change is not None:
                replicas.propose(change)
        if change is not None:
            try:
                with self._plain_lock:
                    self._advance_high_watermark()
            except Exception as error:  # the proposal stands: its caller writes or abandons it
                log.warning(
                    "%s: high watermark advance after an ISR proposal: %r", self.name, error
                )
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

    # --- the follower's side ------------------------------------------------------

    def replica_progress(self, broker_ids: Iterable[int]) -> list[ReplicaProgress]:
        """How far behind its data log each of ``broker_ids`` is, as this leader sees it
        (empty when it does not lead)."""
        replicas = self.replicas
        if self.role.role is not Role.LEADER or replicas is None:
            return []
        followers, isr = replicas.follower_progress(), replicas.isr
        end = self.log.log_end_offset
        progress = []
        for broker_id in broker_ids:
            follower = followers.get(broker_id)
            fetched = UNKNOWN_OFFSET if follower is None else follower.log_end_offset
            if fetched == UNKNOWN_OFFSET:
                behind, behind_bytes = UNKNOWN_OFFSET, UNKNOWN_OFFSET
            else:
                behind, behind_bytes = max(end - fetched, 0), self.log.bytes_from(fetched)
            progress.append(ReplicaProgress(broker_id, behind, behind_bytes, broker_id in isr))
        return progress

    def set_fetch_throttle(self, bytes_per_s: int) -> None:
        """Copy this partition at most ``bytes_per_s`` as a follower (0: no limit)."""
        current = self.fetch_throttle
        if current is None and not bytes_per_s:
            return
        if current is None or current.bytes_per_s != bytes_per_s:
            self.fetch_throttle = FetchThrottle(bytes_per_s) if bytes_per_s else None
            log.info("%s: copied at most %s bytes/s", self.name, bytes_per_s or "unlimited")

    def replica_fetch_positions(self) -> list[ReplicaFetchPartition]:
        """Where this follower fetches each log next (none: it follows nobody, or its
        throttle holds it back this time)."""
        role = self.role
        throttle = self.fetch_throttle
        if role.role is not Role.FOLLOWER or (throttle is not None and not throttle.may_fetch()):
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
                    # A throttled copy asks a second's worth at most (the leader still
                    # answers one whole batch), so it copies at an even pace.
                    max_bytes=0 if throttle is None else throttle.bytes_per_s,
                )
            )
        return positions

    def apply_fetched(self, fetched: FetchedPartition, leader_id: int) -> bool:
        """A follower takes its leader's answer for one log: cut where the logs part, or
        append the batches as they are (fsynced with ``replica_fsync``: the next fetch
        offset acknowledges them) and learn the high watermark and the log start
        (``_follow_log_start``); the journal log's
        committed records are applied to LMDB then (J1), and only those.

        An answer from a broker this partition no longer follows, or to a fetch from
        before a cut (its batches do not start at the log end), is dropped. A late answer
        of the same leader from an older epoch is safe to take: that leader's log held it,
        and if it cut it since, the next fetch's epoch check cuts it here too (KIP-320);
        the high watermark it brings covered only what was committed then.

        False when the answer's records were dropped (the first two cases above): a
        journal log's, whose data log answer must be dropped too (``replica_read_both``)."""
        with self._plain_lock:
            role = self.role
            if role.role is not Role.FOLLOWER or role.leader_id != leader_id:
                return False
            if fetched.error or self._changes_nothing(fetched):
                return True  # nothing arrived: nobody to wake
            if fetched.log is LogKind.JOURNAL:
                return self._apply_fetched_journal(fetched)
            if fetched.diverging is not None:
                end = self.log.log_end_offset
                cut = truncation_offset(self.log.epochs, end, fetched.diverging)
                self._truncate_follower(cut)
                return True
            if not fetched.records and fetched.log_start_offset > self.log.log_end_offset:
                self._restart_at(fetched.log_start_offset)
                return True
            if fetched.records:
                first = read_header(fetched.records)
                if first.base_offset != self.log.log_end_offset:
                    return False  # an answer to an older fetch offset
                if self.fetch_throttle is not None:
                    self.fetch_throttle.copied(len(fetched.records))
                self.log.append_as_follower(
                    split_batches(fetched.records),
                    sync=self.replication.replica_fsync,
                    # One batch (most rounds' answer) needs no append-in-progress mark:
                    # a reader of the files sees it whole, by its length and CRC, or not
                    # at all; two files rewritten less per round (``append_marks``).
                    marked=first.size_bytes != len(fetched.records),
                )
                for view in split_batches(fetched.records):
                    header = read_header(view)
                    self.sequences.observe(header, header.base_offset)
                self.producer_snapshots.after_append(self.sequences)
            self.high_watermark.advance_to(min(fetched.high_watermark, self.log.log_end_offset))
            self._follow_log_start(fetched.log_start_offset)
        self._wake_fetchers()
        return True

    def _changes_nothing(self, fetched: FetchedPartition) -> bool:
        """An answer with no records that parts nowhere, restarts nothing and moves no
        high watermark or log start: most of a fetch round's answers (one round carries
        every log this follower copies from the leader, and a write changes one or two).
        Under the partition's lock."""
        if fetched.records or fetched.diverging is not None:
            return False
        if fetched.log is LogKind.JOURNAL:
            return fetched.log_start_offset <= self.journal.journal_log(
                self.name
            ).log_end_offset and self.journal.commits_nothing(self.name, fetched.high_watermark)
        end, high_watermark = self.log.log_end_offset, self.high_watermark.value
        return (
            fetched.log_start_offset <= end
            and min(fetched.high_watermark, end) <= high_watermark
            and min(fetched.log_start_offset, high_watermark) <= self.log.log_start_offset
        )

    def _apply_fetched_journal(self, fetched: FetchedPartition) -> bool:
        """``apply_fetched`` for the journal log (under the partition's lock)."""
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
            return True
        if not fetched.records and fetched.log_start_offset > journal_log.log_end_offset:
            log.warning(
                "%s: this replica's journal log ends at %d, below its leader's journal-log "
                "start %d: dropping it and restarting at %d",
                self.name,
                journal_log.log_end_offset,
                fetched.log_start_offset,
                fetched.log_start_offset,
            )
            self.journal.restart_at(self.name, fetched.log_start_offset)
            return True
        if fetched.records:
            if read_header(fetched.records).base_offset != journal_log.log_end_offset:
                return False  # an answer to an older fetch offset
            if self.fetch_throttle is not None:
                self.fetch_throttle.copied(len(fetched.records))
            self.journal.append_replicated(
                self.name, split_batches(fetched.records), sync=self.replication.replica_fsync
            )
        # J1: LMDB applies what the leader says is committed, before the next fetch
        # (a failed application raises to the fetcher and is queued again next time).
        self.journal.commit_to(self.name, fetched.high_watermark, wait=True)
        return True

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

    def _follow_log_start(self, leader_log_start_offset: int) -> None:
        """Start this replica's data log where its leader's starts (records deleted there,
        or its retention), as Kafka's follower takes the leader's log start from each fetch
        answer; never past this replica's high watermark (what it holds may not be
        committed yet), nor past a copy its journal does not record as APPLIED yet (the
        copier's recovery needs it, should this replica lead)."""
        target = min(leader_log_start_offset, self.high_watermark.value)
        if target > self.log.log_start_offset:
            self.log.advance_log_start(target, protected_from_offset=self._applying_start_offset)

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

    # --- high watermark -----------------------------------------------------------

    def replicated_end(self) -> int:
        """The offset below which every in-sync replica holds the log: on one node, the
        log end; on a cluster leader, what its maximal ISR holds; a follower learns it from
        its leader (``apply_fetched``). Tests hold it back."""
        replicas = self.replicas
        if self.role.role is Role.LEADER and replicas is not None:
            return replicas.high_watermark_candidate(self.log.log_end_offset)
        return self.high_watermark.value

    def _advance_high_watermark(self) -> None:
        with self._watermark_lock:  # against an ISR expansion's check (``isr_change_due``)
            self.high_watermark.advance_to(self.replicated_end())
            replicas = self.replicas
            if self.role.role is Role.LEADER and replicas is not None:
                # The journal log's: its records below it are committed, and go to LMDB (J1).
                journal_end = self.journal.journal_log(self.name).log_end_offset
                candidate = replicas.high_watermark_candidate(journal_end, LogKind.JOURNAL)
                # Against the high watermark: a ``commit_to`` whose queueing failed part
                # way (a bounded replay's wait) is finished by the next one.
                if candidate > self.journal.high_watermark(self.name):
                    self.journal.commit_to(self.name, candidate)

    def _wake_fetchers(self) -> None:
        with self.data_arrived:  # writers waiting for their acknowledgement, promotions
            self.data_arrived.notify_all()
        self.replication.long_poll.wake(self.topic_partition)  # consumers' and followers' polls


__all__ = ["PartitionReplica"]


def _answer_end(fetch_offset: int, answer: FetchedPartition) -> int:
    """The offset a follower's log reaches once it appends ``answer`` to a log ending at
    ``fetch_offset``: -1 for an answer that appends nothing it can build on (refused,
    parting, from another log start)."""
    if answer.error or answer.diverging is not None:
        return -1
    if not answer.records:
        return fetch_offset if answer.log_start_offset <= fetch_offset else -1
    end = fetch_offset
    for view in split_batches(answer.records):
        header = read_header(view)
        end = header.base_offset + header.last_offset_delta + 1
    return end
