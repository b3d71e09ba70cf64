"""The local data journal as its users see it: a journal log per partition in front of LMDB.

Every change to the local data journal is first a record of the partition's
journal log (``journal_log_records``: ENTRY, MARK_*, PURGE), a ``DataLog`` in
``<partition dir>/journal/`` with the data log's segments, CRCs, recovery and
``truncate_to``, removed with the partition's directory. Then it is applied to
LMDB (``LocalJournal``), in offset order, by the journal's writer thread, which
moves the partition's applied offset in the same LMDB transaction. LMDB is a view
that can be rebuilt from the logs; the logs are what a replica would copy.

    write   under the partition's order lock: append the record (not fsynced yet)
            and queue its application; then wait for it. The journal's writer
            thread fsyncs the journal log before the LMDB transaction that applies
            the record: one fsync per log and group, so concurrent writers of one
            partition share it as they share LMDB's (group commit on both)
    open    replay the journal log from LMDB's applied offset to its end
    repair  after a failed application (a full disk, an I/O error) the records
            from LMDB's applied offset on were all refused: they are cut from
            the journal log before the next write, so a failed call left nothing

Rules of the cluster design (CLUSTER.md section 3.4), where this module holds them:

    J1 commit-then-apply   only records below the journal log's high watermark are
                           applied (``high_watermark``: the durable end on one node; in a
                           cluster what the in-sync replicas hold, ``commit_to``)
    J5 followers never decide   only ``LocalJournal``'s writer changes LMDB, and only
                           to apply a record; the copier decides by appending records

A replicated partition's journal log (``open_partition(..., wait_committed=...)``, a
cluster broker's) is applied by ``commit_to`` only: its leader's writes append, wait
until the partition says the record is committed (``wait_committed``: the in-sync
replicas hold it, J2), then wait for LMDB; a follower appends what its leader sent
(``append_replicated``) and applies what the leader's high watermark covers. A replica
never cuts a committed record: a divergent suffix (``truncate``) lies above everything
queued for LMDB, and a failed application is queued again from LMDB's applied offset
instead of being cut (the record may be on the other replicas already).

Thread rule: any thread may call any method. Writes of one partition are ordered by
its order lock (held for the append and the queueing only, so the LMDB group commit
still gathers the writes of every partition and caller); reads go to LMDB directly.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    CorruptJournalError,
    CorruptLogError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TransactionCompletedError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.config import FLUSH_INTERVAL, INT64_MAX
from twinlog.engine.records.batch_format import BATCH_BYTES_HARD_MAX, BatchHeader
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal import journal_log_records as records
from twinlog.journal.journal_log_records import (
    ENTRY_OVERHEAD_BYTES_MAX,
    JournalLogRecord,
    build_batch_pieces,
    decode,
)
from twinlog.journal.local_format import CopyRecord, CopyState
from twinlog.journal.local_journal import (
    JournalEntry,
    JournalStatistics,
    JournalUsage,
    LocalJournal,
    make_entry,
    make_mark_applying,
)
from twinlog.journal.local_writer import PendingWrite

log = logging.getLogger(__name__)

JOURNAL_LOG_DIRECTORY = "journal"  # inside the partition's directory
# Records are small but for ENTRY's batch; small segments let retention free space soon.
JOURNAL_LOG_SEGMENT_BYTES = 64 * 1024 * 1024
REPLAY_READ_BYTES = 1 << 20
REPLAY_PENDING_MAX = 1024  # applications queued at once while replaying (they group)
# Refusals depend only on LMDB's state, so a replay meets them again where the first
# application did: they are no-ops there (the applied offset moved past them).
DETERMINISTIC_REFUSALS = (TransactionCompletedError, InvalidTxnStateError)
PENDING_STATES = (CopyState.OPEN, CopyState.APPLYING)


def journal_log_config(
    batch_bytes_max: int, segment_bytes: int = JOURNAL_LOG_SEGMENT_BYTES
) -> LogConfig:
    """A journal log's settings: an ENTRY holds a producer's batch plus a few fields.

    Never flushed on append: the journal's writer thread fsyncs it before applying
    (``_JournalLog.make_durable``), once for every record appended so far.
    """
    return LogConfig(
        segment_bytes=segment_bytes,
        retention_bytes=-1,
        retention_ms=-1,
        flush_policy=FLUSH_INTERVAL,
        flush_interval_ms=INT64_MAX,
        flush_interval_bytes=INT64_MAX,
        batch_bytes_max=min(batch_bytes_max + ENTRY_OVERHEAD_BYTES_MAX, BATCH_BYTES_HARD_MAX),
    )


class _Waiter:
    """A leader's record appended and not yet queued for LMDB (its writer waits on it)."""

    __slots__ = ("pending_write", "record")

    def __init__(self, record: JournalLogRecord) -> None:
        self.record = record
        self.pending_write: PendingWrite | None = None  # set, under the order lock, once queued


class _JournalLog:
    """One partition's journal log and its write order.

    Invariants (under ``order_lock``), replicated or not:
        applied by LMDB <= enqueued_end <= high_watermark <= log end
        enqueued_end == high_watermark after every ``commit_to`` and replay
    """

    def __init__(
        self,
        partition: str,
        data_log: DataLog,
        applied_end: int,
        wait_committed: Callable[[int], None] | None = None,
    ) -> None:
        self.partition = partition
        self.log = data_log
        self.order_lock = threading.Lock()
        self.needs_repair = False
        data_log.flush()  # what recovery kept may be in the page cache only
        self.durable_end = data_log.log_end_offset
        # Replicated: the partition's wait for "the in-sync replicas hold every record
        # below this offset" (raises when that cannot come: leadership moved, a timeout).
        self.wait_committed = wait_committed
        # Replicated: the offset below which the in-sync replicas hold the log, as this
        # replica knows it. At open only what LMDB applied is known to be committed: the
        # rest may be a suffix no other replica holds (it waits for the leader's word).
        self.committed_end = applied_end
        self.enqueued_end = applied_end  # the next record to queue for LMDB
        self.pending: dict[int, _Waiter] = {}  # replicated leader writes not queued yet
        # Replicated: may this replica append records of its own? Only while it leads
        # (J5): set by ``become_leader``, cleared by ``step_down``, read under the order
        # lock with the append, so no record is appended after the step-down.
        self.leads = False

    @property
    def replicated(self) -> bool:
        return self.wait_committed is not None

    @property
    def high_watermark(self) -> int:
        """Offset below which records are committed: on one node the durable end; on a
        replicated partition what the in-sync replicas hold (``committed_end``)."""
        return self.committed_end if self.replicated else self.durable_end

    def make_durable(self, offset: int) -> None:
        """fsync the log if record ``offset`` is not durable yet (the journal's writer
        thread only, before the LMDB transaction that applies it)."""
        if offset >= self.durable_end:
            # Appends go on during the fsync and join the next group's.
            self.durable_end = max(self.durable_end, self.log.flush_beside_appends())
        # J1 commit-then-apply: LMDB sees only records below the high watermark.
        assert offset < self.high_watermark, (
            f"{self.partition}: journal-log record {offset} would be applied at or above "
            f"the high watermark {self.high_watermark}"
        )


class JournalLogs:
    """Every partition's journal log, applied to the broker's one LMDB (``LocalJournal``).

    Writes take the partition name and return what ``LocalJournal``'s did; reads
    are ``LocalJournal``'s. A partition's journal log is opened (and replayed into
    LMDB) by ``open_partition`` before any write to it.
    """

    def __init__(self, local: LocalJournal) -> None:
        self.local = local
        self._logs: dict[str, _JournalLog] = {}
        self._logs_lock = threading.Lock()
        # Every journaled byte is written once: LMDB's entries name their ENTRY record here.
        local.read_batches_from_logs(self._logged_batch)

    @property
    def directory(self) -> Path:
        return self.local.directory

    # --- partitions -----------------------------------------------------------------

    def open_partition(
        self,
        partition: str,
        directory: Path,
        batch_bytes_max: int = LogConfig.batch_bytes_max,
        segment_bytes: int = JOURNAL_LOG_SEGMENT_BYTES,
        wait_committed: Callable[[int], None] | None = None,
    ) -> int:
        """Open the partition's journal log in ``directory/journal`` and replay into LMDB
        what it has not applied; the number of records replayed.

        ``wait_committed`` makes the journal log replicated (a cluster partition): the
        partition's wait until the in-sync replicas hold every record below an offset.
        Such a log replays nothing at open beyond what LMDB applied: the rest waits for
        ``commit_to``.

        Raises CorruptJournalError when LMDB has applied records the log no longer
        holds (the log lost its tail, or segments LMDB still needs): never a silent
        reset. A partition LMDB has no row for is rebuilt from the log's start.
        """
        data_log = DataLog.open(
            directory / JOURNAL_LOG_DIRECTORY, journal_log_config(batch_bytes_max, segment_bytes)
        )
        try:
            applied_end = self._applied_end(partition, data_log)
            journal_log = _JournalLog(partition, data_log, applied_end, wait_committed)
            replayed = self._replay(journal_log)
        except BaseException:
            data_log.close()
            raise
        with self._logs_lock:
            if partition in self._logs:
                data_log.close()
                raise TwinlogError(f"the journal log of {partition} is open already")
            self._logs[partition] = journal_log
        if replayed:
            log.info(
                "%s: %d journal-log records replayed into the local journal", partition, replayed
            )
        return replayed

    def close_partition(self, partition: str) -> None:
        """Close the partition's journal log (its writes finished: the caller stopped them)."""
        with self._logs_lock:
            journal_log = self._logs.pop(partition, None)
        if journal_log is not None:
            with journal_log.order_lock:
                journal_log.log.close()

    def delete_partition(self, partition: str) -> int:
        """Close the journal log and forget the partition in LMDB (its directory is the
        caller's to remove); the entries dropped."""
        self.close_partition(partition)
        return self.local.drop_partition(partition)

    def journal_log(self, partition: str) -> DataLog:
        return self._journal_log(partition).log

    def _journal_log(self, partition: str) -> _JournalLog:
        journal_log = self._logs.get(partition)
        if journal_log is None:
            raise UnknownTopicOrPartitionError(
                f"{partition} has no journal log open (the partition is closed or deleted)"
            )
        return journal_log

    def partitions(self) -> list[str]:
        with self._logs_lock:
            return list(self._logs)

    def _logged_batch(self, partition: str, sequence: int) -> tuple[int, memoryview]:
        """(transaction id, batch) of the ENTRY record at journal offset ``sequence``: what an
        LMDB entry of ENTRY_FORMAT_IN_LOG names. Retention keeps every segment holding an
        entry of an OPEN or APPLYING transaction, the only ones LMDB still has."""
        journal_log = self._journal_log(partition)
        try:
            chunk = journal_log.log.read(sequence, 1)  # the one batch holding that record
        except OffsetOutOfRangeError as error:
            raise CorruptJournalError(
                f"{partition}: the local journal names journal-log record {sequence}, which its "
                f"journal log no longer holds ({error}); see docs/formats.md, 'Local data "
                "journal: Damage'"
            ) from None
        except CorruptLogError as error:  # the batch CRC caught a flipped bit: never used
            raise CorruptJournalError(
                f"{partition}: the journal-log record {sequence} holding a journaled batch is "
                f"damaged ({error}); it was not used. Stop the broker, copy the data directory "
                "aside and see docs/formats.md, 'Local data journal: Damage'"
            ) from error
        if not chunk:
            raise CorruptJournalError(
                f"{partition}: the local journal names journal-log record {sequence}, but its "
                f"journal log ends at {journal_log.log.log_end_offset}; see docs/formats.md, "
                "'Local data journal: Damage'"
            )
        for batch in iter_batches(chunk, crc_checked=True):  # the log's read checked it
            # Views, not copies: the batch is copied once, by the copy's write.
            columns = batch.columns(views=True)
            for offset, value in zip(columns.offsets, columns.values, strict=True):
                if offset != sequence:
                    continue
                if value is None:
                    break
                entry = records.decode(value, f"{sequence} of {partition}")
                if not isinstance(entry, records.Entry):
                    break
                return entry.transaction_id, memoryview(entry.batch)
        raise CorruptJournalError(
            f"{partition}: the local journal names journal-log record {sequence} as an ENTRY, "
            "but the journal log holds no ENTRY there; see docs/formats.md, 'Local data "
            "journal: Damage'"
        )

    # --- replay ---------------------------------------------------------------------

    def _applied_end(self, partition: str, data_log: DataLog) -> int:
        """The journal offset LMDB applied the partition's log up to (checked against the log)."""
        start, end = data_log.log_start_offset, data_log.log_end_offset
        row = self.local.partition_row(partition)
        if row is None:
            return start  # LMDB never saw this partition, or was rebuilt empty
        if row.next_offset > end:
            raise CorruptJournalError(
                f"{partition}: the local journal has applied journal-log records up to offset "
                f"{row.next_offset - 1}, but the journal log {data_log.directory} ends at {end}: "
                "it lost its tail, and with it batches that were acknowledged. Stop the broker, "
                "copy the partition directory and the journal aside, and restore them from a "
                "backup (docs/formats.md, 'Local data journal: Damage')"
            )
        if row.next_offset < start:
            raise CorruptJournalError(
                f"{partition}: the local journal has applied journal-log records below offset "
                f"{row.next_offset} only, but the journal log {data_log.directory} starts at "
                f"{start}: segments it still needed are gone (docs/formats.md, "
                "'Local data journal: Damage')"
            )
        return row.next_offset

    def _replay(self, journal_log: _JournalLog) -> int:
        replay_from = journal_log.enqueued_end
        _wait_replayed(self._enqueue_committed(journal_log))
        return journal_log.enqueued_end - replay_from  # one record per offset

    def _enqueue_committed(self, journal_log: _JournalLog) -> list[PendingWrite]:
        """Queue for LMDB, in order, every record from ``enqueued_end`` below the high
        watermark: a leader's waiting writes from memory (their writers wait for them),
        the others read from the log; those others' pending writes, not waited for yet.
        Called under the order lock, or before the log is shared (open)."""
        high_watermark = journal_log.high_watermark
        unowned: list[PendingWrite] = []
        while journal_log.enqueued_end < high_watermark:
            offset = journal_log.enqueued_end
            waiter = journal_log.pending.pop(offset, None)
            if waiter is not None:
                waiter.pending_write = self._enqueue(journal_log, offset, waiter.record)
                journal_log.enqueued_end = offset + 1
                continue
            for record_offset, record in read_records(journal_log.log, offset, high_watermark):
                if record_offset in journal_log.pending:
                    break  # a waiting write: from memory, with its waiter told
                unowned.append(self._enqueue(journal_log, record_offset, record))
                journal_log.enqueued_end = record_offset + 1
                if len(unowned) >= REPLAY_PENDING_MAX:
                    _wait_replayed(unowned)  # bounds the queue (and clears the list)
            else:
                # read_records stops early only at the log end: nothing more to queue
                if journal_log.enqueued_end == offset:
                    raise CorruptJournalError(
                        f"{journal_log.partition}: journal-log record {offset} is below the "
                        f"high watermark {high_watermark} but the log {journal_log.log.directory} "
                        f"ends at {journal_log.log.log_end_offset}"
                    )
        return unowned

    def _enqueue(
        self, journal_log: _JournalLog, offset: int, record: JournalLogRecord
    ) -> PendingWrite:
        return self.local.enqueue_record(
            journal_log.partition,
            offset,
            record,
            lambda: journal_log.make_durable(offset),
            durable_log=journal_log,
        )

    # --- writes ---------------------------------------------------------------------

    def _write(
        self,
        partition: str,
        record: JournalLogRecord,
        on_appended: Callable[[int], None] | None = None,
    ) -> Any:
        """Append ``record`` to the partition's journal log, apply it, return the result.
        ``on_appended(offset)``: on a replicated leader, called once the record is in the
        log, before the wait for its replicas (whatever that wait's outcome)."""
        journal_log = self._journal_log(partition)
        # In pieces: an ENTRY's batch goes to the file as the producer sent it, uncopied.
        batch = build_batch_pieces(record, int(time.time() * 1000))
        if journal_log.replicated:
            return self._write_replicated(journal_log, record, batch, on_appended)
        with journal_log.order_lock:
            if journal_log.needs_repair:
                self._repair(journal_log)
            failpoints.hit("journal_log.before_append")
            # Built just above, so its CRC is fresh: checking it again would hash every
            # journaled byte a second time. Fsynced by the writer, before applying.
            offset = journal_log.log.append_pieces(batch)
            try:
                failpoints.hit("journal_log.before_apply")
                pending = self._enqueue(journal_log, offset, record)
                journal_log.enqueued_end = offset + 1
            except BaseException:
                # In the log but never queued: every later record would reach LMDB out of
                # order. The repair cuts it before the next write (a crash first replays it).
                journal_log.needs_repair = True
                raise
        try:
            return pending.wait()
        except BaseException:
            # A refusal moved the applied offset past the record; a failure did not,
            # and the records queued after it are refused as out of order. Which one
            # it was, the repair reads from LMDB before the next write.
            journal_log.needs_repair = True
            raise

    def _write_replicated(
        self,
        journal_log: _JournalLog,
        record: JournalLogRecord,
        batch: list[bytes | memoryview],
        on_appended: Callable[[int], None] | None = None,
    ) -> Any:
        """A replicated leader's write: append, wait until the in-sync replicas hold it
        (J2), then until LMDB applied it (J1: ``commit_to`` queued it). A failure while
        waiting leaves the record in the log: the leader that follows decides its fate
        (a retry of the same batch is recognised by its sequence)."""
        assert journal_log.wait_committed is not None
        waiter = _Waiter(record)
        with journal_log.order_lock:
            if not journal_log.leads:
                raise NotLeaderOrFollowerError(
                    f"{journal_log.partition}: this replica does not lead the partition; its "
                    "journal log takes only its leader's records (refresh metadata and send to "
                    "the leader)"
                )
            if journal_log.needs_repair:
                self._repair(journal_log)
            failpoints.hit("journal_log.before_append")
            offset = journal_log.log.append_pieces(batch)
            journal_log.pending[offset] = waiter
            if on_appended is not None:
                on_appended(offset)
        try:
            failpoints.hit("journal_log.before_apply")
            journal_log.wait_committed(offset + 1)
        except BaseException:
            with journal_log.order_lock:
                journal_log.pending.pop(offset, None)  # queued from the log if committed later
            raise
        # The wait ended on the journal high watermark, which only commit_to moves, under
        # the order lock, queueing the waiters it covers: taking the lock waits that out.
        with journal_log.order_lock:
            pending = waiter.pending_write
        if pending is None:  # cut by a truncation, or dropped when leadership moved
            raise NotLeaderOrFollowerError(
                f"{journal_log.partition}: the journal-log record at {offset} is no longer this "
                "leader's to apply (leadership moved); it may or may not be kept: retry at the "
                "new leader (a retried batch is recognised by its sequence)"
            )
        try:
            return pending.wait()
        except DETERMINISTIC_REFUSALS:
            raise
        except BaseException:
            journal_log.needs_repair = True  # LMDB stopped at this record: queue it again
            raise

    # --- replication (a replicated partition's journal log) ------------------------

    def become_leader(self, partition: str, leader_epoch: int) -> None:
        """This replica leads the partition at ``leader_epoch``: its own records may be
        appended from now on, stamped with that epoch."""
        journal_log = self._journal_log(partition)
        with journal_log.order_lock:
            journal_log.log.become_leader(leader_epoch)
            journal_log.leads = True

    def append_replicated(
        self, partition: str, batches: Iterable[memoryview], *, sync: bool
    ) -> None:
        """A follower's append of its leader's records, as they are (offsets and epochs
        kept); applied once ``commit_to`` covers them."""
        journal_log = self._journal_log(partition)
        with journal_log.order_lock:
            journal_log.log.append_replicated(batches, sync=sync)
            if sync:
                journal_log.durable_end = journal_log.log.log_end_offset

    def commit_to(self, partition: str, high_watermark: int, *, wait: bool = False) -> int:
        """The in-sync replicas hold the partition's journal log below ``high_watermark``:
        queue those records for LMDB, in order (J1); the journal high watermark now.

        ``wait``: until LMDB applied them (a follower's fetcher; a failure raises, and
        the next call queues them again). A leader does not wait: its writers do."""
        journal_log = self._journal_log(partition)
        assert journal_log.replicated, f"{partition}: commit_to on an unreplicated journal log"
        with journal_log.order_lock:
            if journal_log.needs_repair:
                self._repair(journal_log)
            committed = min(high_watermark, journal_log.log.log_end_offset)
            journal_log.committed_end = max(journal_log.committed_end, committed)
            unowned = self._enqueue_committed(journal_log)
            if wait:
                try:
                    _wait_replayed(unowned)
                except BaseException:
                    journal_log.needs_repair = True
                    raise
            return journal_log.committed_end

    def truncate(self, partition: str, offset: int) -> None:
        """Cut a replica's divergent suffix (KIP-101). Never below a record queued for LMDB:
        those are committed, and a committed record is on every in-sync replica."""
        journal_log = self._journal_log(partition)
        with journal_log.order_lock:
            if offset < journal_log.enqueued_end:
                raise CorruptJournalError(
                    f"{partition}: asked to cut the journal log at {offset}, below "
                    f"{journal_log.enqueued_end}, which is committed and applied to the local "
                    "journal: the replicas disagree on committed records. Stop the broker and "
                    "copy its data directory aside"
                )
            journal_log.log.truncate_to(offset)
            journal_log.durable_end = min(journal_log.durable_end, offset)
            journal_log.committed_end = min(journal_log.committed_end, offset)
            for cut in [key for key in journal_log.pending if key >= offset]:
                del journal_log.pending[cut]  # their writers' waits fail: leadership moved

    def step_down(self, partition: str) -> None:
        """This replica follows now: it appends no record of its own, and its writes still
        waiting for the replicas are no longer its to apply (committed ones are queued
        from the log by ``commit_to``)."""
        journal_log = self._journal_log(partition)
        with journal_log.order_lock:
            journal_log.leads = False
            journal_log.pending.clear()

    def high_watermark(self, partition: str) -> int:
        return self._journal_log(partition).high_watermark

    def wait_log_committed(self, partition: str) -> None:
        """A replicated leader: wait until the in-sync replicas hold the partition's whole
        journal log and LMDB applied it (raising what the wait raises: too few replicas,
        a timeout). A record left in the log by a failed wait (a MARK_APPLYING whose
        replicas did not answer) is then in LMDB, where the copier's recovery sees it,
        instead of committing later beside a newer one. No-op on one node."""
        journal_log = self._journal_log(partition)
        if journal_log.wait_committed is None:
            return
        end = journal_log.log.log_end_offset
        if end > journal_log.committed_end:
            journal_log.wait_committed(end)
        self.local.barrier()

    def wait_applied(self) -> None:
        """Until LMDB applied every record queued so far (of every partition)."""
        self.local.barrier()

    def repair(self, partition: str) -> None:
        """Cut the records of the partition's journal log whose application failed now,
        not at its next write: for a caller about to write elsewhere what only holds if
        they never happened (the copier, before it appends to the data log after a
        failed MARK_APPLYING that a crash would otherwise replay)."""
        journal_log = self._journal_log(partition)
        with journal_log.order_lock:
            if journal_log.needs_repair:
                self._repair(journal_log)

    def _repair(self, journal_log: _JournalLog) -> None:
        """Cut the records LMDB did not apply (their callers all got an error) from the log;
        on a replicated log queue them again instead (they may be on other replicas).

        Called under the order lock: nothing new is queued for this partition; the
        no-op waits out what is queued already.
        """
        self.local.barrier()
        row = self.local.partition_row(journal_log.partition)
        applied_end = journal_log.log.log_start_offset if row is None else row.next_offset
        end = journal_log.log.log_end_offset
        if journal_log.replicated:
            if applied_end < journal_log.enqueued_end:
                journal_log.enqueued_end = applied_end
                _wait_replayed(self._enqueue_committed(journal_log))
                log.warning(
                    "%s: journal-log records from %d applied again after a failed application",
                    journal_log.partition,
                    applied_end,
                )
        elif applied_end < end:
            journal_log.log.truncate_to(applied_end)
            # The cut records may have been made durable before LMDB failed: the records
            # appended next take their offsets and must be fsynced before they are applied.
            journal_log.durable_end = min(journal_log.durable_end, applied_end)
            journal_log.enqueued_end = min(journal_log.enqueued_end, applied_end)
            log.warning(
                "%s: cut journal-log records %d..%d, whose application failed (their callers "
                "got the error)",
                journal_log.partition,
                applied_end,
                end - 1,
            )
        journal_log.needs_repair = False

    def append(
        self,
        partition: str,
        transaction_id: int,
        batch: bytes | memoryview,
        *,
        producer_id: int | None = None,
        producer_generation: int | None = None,
        base_sequence: int | None = None,
        attempt: bytes = b"",
        on_appended: Callable[[int], None] | None = None,
    ) -> int:
        """Journal ``batch`` of an OPEN transaction (an ENTRY); its sequence (= journal offset)
        once durable and applied. Raises TransactionCompletedError when the transaction
        is APPLYING, APPLIED or ABORTED here, or below the partition's purge watermark.
        ``on_appended``: as ``_write``'s (a replicated leader records the batch's sequence
        there, so a retry after an unanswered wait is a duplicate, never a second entry).
        """
        entry = make_entry(
            transaction_id,
            batch,
            producer_id=producer_id,
            producer_generation=producer_generation,
            base_sequence=base_sequence,
            attempt=attempt,
        )
        return int(self._write(partition, entry, on_appended))

    def mark_applying(
        self,
        partition: str,
        transaction_id: int,
        start_offset: int,
        attempts: Iterable[bytes] | None = None,
    ) -> CopyRecord:
        """MARK_APPLYING, durable and applied before the caller copies a byte (J4)."""
        record = self._write(partition, make_mark_applying(transaction_id, start_offset, attempts))
        assert isinstance(record, CopyRecord) and record.state is CopyState.APPLYING
        return record

    def mark_applied(
        self, partition: str, transaction_id: int, first_offset: int, next_offset: int
    ) -> CopyRecord:
        """MARK_APPLIED(first, next): the entries go, the range is recorded."""
        mark = records.MarkApplied(transaction_id, first_offset, next_offset)
        result: CopyRecord = self._write(partition, mark)
        return result

    def mark_aborted(self, partition: str, transaction_id: int) -> CopyRecord:
        result: CopyRecord = self._write(partition, records.MarkAborted(transaction_id))
        return result

    def purge_partition_below(self, partition: str, low_watermark: int) -> int:
        """A PURGE record on one partition; the entries it dropped."""
        return int(self._write(partition, records.Purge(low_watermark)))

    def purge_below(self, low_watermark: int) -> int:
        """PURGE every open partition that holds a row below ``low_watermark``; entries dropped.

        Only those: a PURGE is an fsynced append, and a partition without such rows
        has nothing to drop. A replicated partition is purged by its leader only; its
        followers apply the leader's PURGE records (J5). (A late batch of a completed transaction is refused
        by its coordinator before it gets here; the per-partition watermark is a
        second guard, raised whenever the partition has something to purge.)
        """
        dropped = 0
        for partition in self.partitions():
            rows = self.local.transactions(partition)
            if any(row.transaction_id < low_watermark for row in rows):
                try:
                    dropped += self.purge_partition_below(partition, low_watermark)
                except UnknownTopicOrPartitionError:
                    continue  # deleted meanwhile
                except NotLeaderOrFollowerError:
                    continue  # a replicated partition it does not lead: its leader purges (J5)
                except TwinlogError as error:
                    if not error.retriable:
                        raise
                    # Too few replicas or a timeout on one partition: the others are still
                    # purged; this one at the next round (the PURGE may yet be committed).
                    log.info("%s: journal purge deferred: %s", partition, error)
        return dropped

    # --- retention ------------------------------------------------------------------

    def retention_bound(self, partition: str) -> int:
        """Journal-log offset below which no record is needed any more.

        min(first entry of every OPEN or APPLYING transaction here, LMDB's applied
        offset): an open transaction's entries must survive for its copy (and for a
        rebuild of LMDB from the log), and LMDB may be replayed from its applied offset.
        """
        applied = self.local.partition_row(partition)
        bound = 0 if applied is None else applied.next_offset
        for record in self.local.transactions(partition, PENDING_STATES):
            if record.entry_count:
                bound = min(bound, record.first_sequence)
        return bound

    def apply_retention(self, partition: str) -> int:
        """Delete the journal log's segments wholly below ``retention_bound``; how many."""
        journal_log = self._journal_log(partition)
        with journal_log.order_lock:  # no record is appended or applied meanwhile
            bound = self.retention_bound(partition)
            # The applied offset just read must be on disk before the records below it go:
            # in the "journal_log" sync mode LMDB commits unsynced, and after a power loss it
            # may come back older and replay from an earlier offset.
            self.local.sync_to_disk()
            return journal_log.log.delete_segments_before(bound)

    # --- reads (LMDB) ---------------------------------------------------------------

    def transaction(self, partition: str, transaction_id: int) -> CopyRecord | None:
        return self.local.transaction(partition, transaction_id)

    def transactions(
        self, partition: str, states: Iterable[CopyState] | None = None
    ) -> list[CopyRecord]:
        return self.local.transactions(partition, states)

    def sequences(
        self, partition: str, transaction_id: int, chosen_only: bool = False
    ) -> array[int]:
        return self.local.sequences(partition, transaction_id, chosen_only)

    def entry(self, partition: str, sequence: int) -> JournalEntry | None:
        return self.local.entry(partition, sequence)

    def iter_batches(
        self, partition: str, sequences: array[int]
    ) -> Generator[memoryview, None, None]:
        return self.local.iter_batches(partition, sequences)

    def iter_batch_headers(
        self, partition: str, sequences: array[int]
    ) -> Generator[BatchHeader, None, None]:
        return self.local.iter_batch_headers(partition, sequences)

    def iter_tagged_headers(
        self, partition: str, sequences: array[int]
    ) -> Generator[tuple[bytes, BatchHeader], None, None]:
        return self.local.iter_tagged_headers(partition, sequences)

    def statistics(self) -> JournalStatistics:
        return self.local.statistics()

    def usage(self) -> JournalUsage:
        return self.local.usage()

    def check(self) -> None:
        self.local.check()

    def close(self) -> None:
        """Close every journal log still open, then LMDB. Idempotent."""
        for partition in self.partitions():
            self.close_partition(partition)
        self.local.close()

    def __enter__(self) -> JournalLogs:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_records(
    data_log: DataLog, from_offset: int, high_watermark: int
) -> Iterator[tuple[int, JournalLogRecord]]:
    """(journal offset, record) of the journal log from ``from_offset`` below ``high_watermark``."""
    offset = from_offset
    while offset < high_watermark:
        chunk = data_log.read(offset, REPLAY_READ_BYTES)
        if not chunk:
            break
        for batch in iter_batches(chunk):
            for record in batch.records():
                if offset <= record.offset < high_watermark:
                    if record.value is None:
                        raise CorruptJournalError(
                            f"{data_log.directory}: journal-log record {record.offset} is empty"
                        )
                    yield record.offset, decode(bytes(record.value), f"{record.offset}")
            offset = batch.header.next_offset


def _wait_replayed(pending: list[PendingWrite]) -> None:
    for request in pending:
        try:
            request.wait()
        except DETERMINISTIC_REFUSALS:
            pass  # refused the first time too: a no-op record
    pending.clear()
