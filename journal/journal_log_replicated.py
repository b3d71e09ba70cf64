"""A cluster partition's journal log: replicated, applied to LMDB only below what its
in-sync replicas hold.

A ``JournalLog`` whose high watermark is not its durable end but ``commit_to``'s word
(``committed_end``). Its leader's writes append, wait until the partition says the
record is committed (``wait_committed``: the in-sync replicas hold it), then wait for
LMDB; a follower appends what its leader sent (``append_replicated``) and applies what
the leader's high watermark covers. A replica never cuts a committed record: a
divergent suffix (``truncate``) lies above everything queued for LMDB, and a failed
application is queued again from LMDB's applied offset instead of being cut (the
record may be on the other replicas already).

Rules of the cluster design (CLUSTER.md section 3.4), where this module holds them:

    J1 commit-then-apply   only records below ``committed_end`` are queued for LMDB
                           (``commit_to``, ``applicable_end``; the assertion in
                           ``JournalLog.make_durable``); the high watermark readers see
                           covers only records queued already
    J2 acknowledged means committed   a leader's write returns once its record is on
                           the in-sync replicas (``wait_committed``) and applied
    J5 followers never decide   a replica appends records of its own only while it
                           leads (``leads``, read under the order lock with the append)

Made by the registry (``journal_logs.JournalLogs.open_partition`` with
``wait_committed``: a cluster broker's partitions), which routes the partition's
replication calls (``engine/broker/partition.py``) here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptJournalError, NotLeaderOrFollowerError
from twinlog.engine.log import DataLog
from twinlog.journal.journal_log import (
    DETERMINISTIC_REFUSALS,
    JournalLog,
    WaitingWrite,
    wait_replayed,
)
from twinlog.journal.journal_log_records import JournalLogRecord, build_batch_pieces
from twinlog.journal.local_journal import LocalJournal
from twinlog.journal.local_writer import PendingWrite
from twinlog.journal.recent_entries import RecentEntries

log = logging.getLogger(__name__)


class ReplicatedJournalLog(JournalLog):
    """One cluster partition's journal log (see the module).

    At open only what LMDB applied is known to be committed: the rest may be a suffix
    no other replica holds, so nothing beyond it is replayed; it waits for ``commit_to``.
    """

    def __init__(
        self,
        local: LocalJournal,
        partition: str,
        data_log: DataLog,
        wait_committed: Callable[[int], None],
        recent: RecentEntries | None = None,
    ) -> None:
        super().__init__(local, partition, data_log, recent)
        # The partition's wait for "the in-sync replicas hold every record below this
        # offset" (raises when that cannot come: leadership moved, a timeout).
        self.wait_committed = wait_committed
        # The offset below which the in-sync replicas hold the log, as this replica knows it.
        self.committed_end = self.enqueued_end
        # May this replica append records of its own? Only while it leads (J5): set by
        # ``become_leader``, cleared by ``step_down``, read under the order lock with the
        # append, so no record is appended after the step-down.
        self.leads = False
        # A leader's ``commit_to`` queues records no writer waits for (the last term's,
        # after a promotion; one whose writer's wait failed): those not known to be
        # applied yet, checked under the order lock before the next write, which repairs
        # first if one failed (else LMDB would stop at it and refuse every later record).
        self._unowned: list[PendingWrite] = []

    @property
    def high_watermark(self) -> int:
        """Offset below which records are committed and queued for LMDB: what the in-sync
        replicas hold, as far as ``commit_to`` has queued it. ``commit_to`` raises
        ``committed_end`` and then queues the records below it one by one (a promoted
        leader's last-term records are read from the log): a reader outside the order
        lock (the promotion barrier, ``wait_log_committed``) that saw ``committed_end``
        cover a record and waited for LMDB could find it not applied yet, and count fewer
        entries of a transaction than its producer wrote."""
        return min(self.committed_end, self.enqueued_end)

    @property
    def applicable_end(self) -> int:
        """J1's bound: what the in-sync replicas hold (``commit_to``'s word)."""
        return self.committed_end

    # --- a leader's writes ----------------------------------------------------------

    def write_all(
        self,
        records: Sequence[JournalLogRecord],
        on_appended: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """A replicated leader's write: append (several records: in one hold of the order
        lock, one wait for their replicas), wait until the in-sync replicas hold them
        (J2), then until LMDB applied them (J1: ``commit_to`` queued them). A failure
        while waiting leaves the records in the log: the leader that follows decides
        their fate (a retry of the same batch is recognised by its sequence).
        ``on_appended(offset)``: called for each record once it is in the log, before the
        wait for its replicas (whatever that wait's outcome). Raises the first failure
        once every record is settled."""
        return self._settle_all(self._append_all(records, on_appended))

    def append_durable(self, records: Sequence[JournalLogRecord]) -> Callable[[], list[Any]]:
        """``write_all``'s append, and an fsync of this log: the records are durable here
        (not yet on the other replicas, not yet applied) when this returns; the function
        returned is the rest of ``write_all`` (call it exactly once). The copier appends
        its copy in between (J4 as section "A copy beside its marks" of docs/formats.md
        says): so this leader never holds a copy whose MARK_APPLYING a crash could lose,
        and its followers get both in one fetch round (``PartitionReplica``'s
        ``replica_read_both``)."""
        waiters = self._append_all(records)
        try:
            # The journal's writer fsyncs again before applying (``make_durable``): an
            # fsync with nothing left to write, cheap; ``durable_end`` stays the writer's.
            self.log.flush_beside_appends()
        except BaseException:
            self._abandon(waiters)
            raise
        return lambda: self._settle_all(waiters)

    def _append_all(
        self,
        records: Sequence[JournalLogRecord],
        on_appended: Callable[[int], None] | None = None,
    ) -> list[tuple[int, WaitingWrite]]:
        now_ms = int(time.time() * 1000)
        batches = [build_batch_pieces(record, now_ms) for record in records]
        waiters: list[tuple[int, WaitingWrite]] = []
        with self.order_lock:
            if not self.leads:
                raise NotLeaderOrFollowerError(
                    f"{self.partition}: this replica does not lead the partition; its "
                    "journal log takes only its leader's records (refresh metadata and send to "
                    "the leader)"
                )
            self._check_unowned()
            if self.needs_repair:
                self._repair()
            for record, batch in zip(records, batches, strict=True):
                failpoints.hit("journal_log.before_append")
                offset = self.log.append_as_leader(batch, validate=False)
                self._keep_if_entry(offset, record)
                waiter = WaitingWrite(record)
                self.pending[offset] = waiter
                waiters.append((offset, waiter))
                if on_appended is not None:
                    on_appended(offset)
        return waiters

    def _abandon(self, waiters: list[tuple[int, WaitingWrite]]) -> None:
        """No writer waits for these records any more: queued from the log if committed."""
        with self.order_lock:
            for offset, _waiter in waiters:
                self.pending.pop(offset, None)

    def _settle_all(self, waiters: list[tuple[int, WaitingWrite]]) -> list[Any]:
        try:
            failpoints.hit("journal_log.before_apply")
            self.wait_committed(waiters[-1][0] + 1)
        except BaseException:
            self._abandon(waiters)
            raise
        # The wait ended on the journal high watermark, which only commit_to moves, under
        # the order lock, queueing the waiters it covers: taking the lock waits that out.
        with self.order_lock:
            pending_writes = [(offset, waiter.pending_write) for offset, waiter in waiters]
        results: list[Any] = []
        first_error: BaseException | None = None
        for offset, pending in pending_writes:
            try:
                results.append(self._settled(offset, pending))
            except BaseException as error:
                results.append(None)
                first_error = first_error or error
        if first_error is not None:
            raise first_error
        return results

    def _settled(self, offset: int, pending: PendingWrite | None) -> Any:
        """What LMDB's application of the leader's record at ``offset`` returned."""
        if pending is None:  # cut by a truncation, or dropped when leadership moved
            raise NotLeaderOrFollowerError(
                f"{self.partition}: the journal-log record at {offset} is no longer this "
                "leader's to apply (leadership moved); it may or may not be kept: retry at the "
                "new leader (a retried batch is recognised by its sequence)"
            )
        try:
            return pending.wait()
        except DETERMINISTIC_REFUSALS:
            raise
        except BaseException:
            self.needs_repair = True  # LMDB stopped at this record: queue it again
            raise

    def wait_log_committed(self) -> None:
        """A leader: wait until the in-sync replicas hold the whole journal log and LMDB
        applied it (raising what the wait raises: too few replicas, a timeout). A record
        left in the log by a failed wait (a MARK_APPLYING whose replicas did not answer)
        is then in LMDB, where the copier's recovery sees it, instead of committing later
        beside a newer one."""
        end = self.log.log_end_offset
        if end > self.high_watermark:  # committed and queued: the barrier then covers it
            self.wait_committed(end)
        self.local.barrier()

    def _repair(self) -> None:
        """Queue again the records LMDB did not apply: they may be on other replicas, so
        they are never cut. Called under the order lock."""
        applied_end = self._lmdb_applied_end()
        self._unowned = []  # settled (the barrier above): what failed is queued again below
        if applied_end < self.enqueued_end:
            self.enqueued_end = applied_end
            wait_replayed(self.enqueue_committed())
            log.warning(
                "%s: journal-log records from %d applied again after a failed application",
                self.partition,
                applied_end,
            )
        self.needs_repair = False

    # --- roles and a follower's records ---------------------------------------------

    def become_leader(self, leader_epoch: int) -> None:
        """This replica leads at ``leader_epoch``: its own records may be appended from
        now on, stamped with that epoch."""
        with self.order_lock:
            self.log.become_leader(leader_epoch)
            self.leads = True

    def step_down(self) -> None:
        """This replica follows now: it appends no record of its own, and its writes still
        waiting for the replicas are no longer its to apply (committed ones are queued
        from the log by ``commit_to``)."""
        with self.order_lock:
            self.leads = False
            self.log.become_follower()  # a second guard beside ``leads``
            self.pending.clear()

    def append_replicated(self, batches: Iterable[memoryview], *, sync: bool) -> None:
        """A follower's append of its leader's records, as they are (offsets and epochs
        kept); applied once ``commit_to`` covers them."""
        with self.order_lock:
            # No append-in-progress mark: only this broker reads a journal log (a mark
            # is two files replaced per fetch, for readers of the files).
            self.log.append_as_follower(batches, sync=sync, marked=False)
            if sync:
                self.durable_end = self.log.log_end_offset

    def commits_nothing(self, high_watermark: int) -> bool:
        """Would ``commit_to(high_watermark)`` do nothing? (everything below it queued,
        nothing to repair or to check): a follower's quiet answer from its leader."""
        with self.order_lock:
            return (
                not self.needs_repair
                and not self._unowned
                and min(high_watermark, self.log.log_end_offset) <= self.committed_end
                and self.enqueued_end >= self.committed_end
            )

    def commit_to(self, high_watermark: int, *, wait: bool = False) -> int:
        """The in-sync replicas hold the log below ``high_watermark``: queue those records
        for LMDB, in order (J1); the journal high watermark now.

        ``wait``: until LMDB applied them (a follower's fetcher; a failure raises, and
        the next call queues them again). A leader does not wait: its writers do."""
        with self.order_lock:
            self._check_unowned()
            if self.needs_repair:
                self._repair()
            committed = min(high_watermark, self.log.log_end_offset)
            self.committed_end = max(self.committed_end, committed)
            try:
                unowned = self.enqueue_committed()
            except BaseException:
                # Failed part way (a bounded replay's wait: LMDB refused a record): the
                # high watermark stays below what is committed, the next call repairs
                # first and queues the rest.
                self.needs_repair = True
                raise
            if wait:
                try:
                    wait_replayed(unowned)
                except BaseException:
                    self.needs_repair = True
                    raise
            else:
                self._unowned.extend(unowned)
            return self.committed_end

    def _check_unowned(self) -> None:
        """Forget the records ``commit_to`` queued unwaited that LMDB applied; if one
        failed (a full disk), the next write repairs first. Under the order lock."""
        still: list[PendingWrite] = []
        for pending in self._unowned:
            failed = pending.failed()
            if failed is None:
                still.append(pending)
            elif failed:
                self.needs_repair = True  # LMDB stopped at it: queue it again
        self._unowned = still

    def restart_at(self, offset: int) -> None:
        """A follower whose leader's journal log starts past this one's end (the leader
        deleted segments no transaction needed any more, and this replica is new, or was
        away that long): forget the partition in LMDB, drop the log, and start empty at
        ``offset``, as the data log does (``truncate_fully_and_start_at``).

        Nothing lost: a journal log starts below the first entry of every transaction
        still open or being copied (``retention_bound``), so those are replayed whole from
        ``offset``; the later records of transactions finished below it find no row here
        and are refused, a no-op (their copies are in the data log, replicated apart).
        Crash order: LMDB first. A crash before the log is dropped leaves a partition
        LMDB has no row of, rebuilt from the old log at open; the leader's next answer
        restarts it again."""
        with self.order_lock:
            assert not self.leads, f"{self.partition}: a leader restarts its journal log"
            self.local.drop_partition(self.partition)
            self.recent.forget_partition(self.partition)
            self.log.truncate_fully_and_start_at(offset)
            self.durable_end = self.committed_end = self.enqueued_end = offset
            self.pending.clear()
            self.needs_repair = False

    def truncate(self, offset: int) -> None:
        """Cut a replica's divergent suffix (KIP-101). Never below a record queued for LMDB:
        those are committed, and a committed record is on every in-sync replica."""
        with self.order_lock:
            if offset < self.enqueued_end:
                raise CorruptJournalError(
                    f"{self.partition}: asked to cut the journal log at {offset}, below "
                    f"{self.enqueued_end}, which is committed and applied to the local "
                    "journal: the replicas disagree on committed records. Stop the broker and "
                    "copy its data directory aside"
                )
            self.recent.forget_from(self.partition, offset)
            self.log.truncate_to(offset)
            self.durable_end = min(self.durable_end, offset)
            self.committed_end = min(self.committed_end, offset)
            for cut in [key for key in self.pending if key >= offset]:
                del self.pending[cut]  # their writers' waits fail: leadership moved
