"""One partition's journal log: its records appended, made durable, replayed into LMDB in
order, repaired after a failed application, and cut by retention.

Every change to the local data journal is first a record of the partition's
journal log (``journal_log_records``: ENTRY, MARK_*, PURGE), a ``DataLog`` in
``<partition dir>/journal/`` with the data log's segments, CRCs, recovery and
``truncate_to``, removed with the partition's directory. Then it is applied to
LMDB (``LocalJournal``), in offset order, by the journal's writer thread, which
moves the partition's applied offset in the same LMDB transaction. LMDB is a view
that can be rebuilt from the logs; the logs are what a replica would copy.

    write   under the log's order lock: append the record (not fsynced yet) and
            queue its application; then wait for it. The journal's writer thread
            fsyncs the journal log before the LMDB transaction that applies the
            record: one fsync per log and group, so concurrent writers of one
            partition share it as they share LMDB's (group commit on both)
    open    check LMDB's applied offset against the log (never a silent reset),
            then replay the log from there to its end
    repair  after a failed application (a full disk, an I/O error) the records
            from LMDB's applied offset on were all refused: they are cut from
            the journal log before the next write, so a failed call left nothing

J1 commit-then-apply (CLUSTER.md section 3.4): only records below the log's high
watermark are applied (``high_watermark``: here the durable end; a cluster
partition's ``ReplicatedJournalLog``, in ``journal_log_replicated``, says what its
in-sync replicas hold).

Made, found and closed by the registry (``journal_logs.JournalLogs``), which routes
every write and retention call of a partition to its log.

Thread rule: any thread may call any method. Writes are ordered by ``order_lock``,
held for the append and the queueing only, so the LMDB group commit still gathers the
writes of every partition and caller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    CorruptJournalError,
    CorruptLogError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    TransactionCompletedError,
)
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.config import FLUSH_INTERVAL, INT64_MAX
from twinlog.engine.records.batch_format import BATCH_BYTES_HARD_MAX
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal import journal_log_records as records
from twinlog.journal.journal_log_records import (
    ENTRY_OVERHEAD_BYTES_MAX,
    JournalLogRecord,
    build_batch_pieces,
    decode,
)
from twinlog.journal.local_format import CopyState
from twinlog.journal.local_journal import LocalJournal
from twinlog.journal.local_writer import PendingWrite
from twinlog.journal.recent_entries import RecentEntries

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
    (``JournalLog.make_durable``), once for every record appended so far.
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


class WaitingWrite:
    """A replicated leader's record appended and not yet queued for LMDB (its writer waits
    on it until ``commit_to`` queues it)."""

    __slots__ = ("pending_write", "record")

    def __init__(self, record: JournalLogRecord) -> None:
        self.record = record
        self.pending_write: PendingWrite | None = None  # set, under the order lock, once queued


class JournalLog:
    """One partition's journal log and its write order (a single-node partition's; a
    cluster partition's is the ``ReplicatedJournalLog`` subclass).

    Invariants (under ``order_lock``):
        applied by LMDB <= enqueued_end <= applicable_end <= log end
        enqueued_end == applicable_end after every replay (and every ``commit_to`` that
        did not fail: one that did leaves the log to be repaired by the next)
        high_watermark <= applicable_end, and <= enqueued_end on a cluster: a reader
        that sees a record below it and waits for LMDB finds it applied

    Construction checks LMDB's applied offset against the log and raises
    CorruptJournalError on a mismatch; ``replay`` then applies what LMDB lacks.
    """

    def __init__(
        self,
        local: LocalJournal,
        partition: str,
        data_log: DataLog,
        recent: RecentEntries | None = None,
    ) -> None:
        self.local = local
        self.partition = partition
        self.log = data_log
        # The ENTRY batches this log appended lately, for the copy (``recent_entries``):
        # told of every ENTRY appended and of every cut, under the order lock.
        self.recent = RecentEntries(bytes_max=0) if recent is None else recent
        self.order_lock = threading.Lock()
        self.needs_repair = False
        applied_end = self._checked_applied_end()
        data_log.flush()  # what recovery kept may be in the page cache only
        self.durable_end = data_log.log_end_offset
        self.enqueued_end = applied_end  # the next record to queue for LMDB
        # A replicated leader's writes not queued yet, by offset (empty on one node).
        self.pending: dict[int, WaitingWrite] = {}

    @property
    def high_watermark(self) -> int:
        """Offset below which records are committed: on one node the durable end."""
        return self.durable_end

    @property
    def applicable_end(self) -> int:
        """Offset below which records may be queued for LMDB (J1): on one node the durable
        end; the high watermark may trail it while they are queued (a cluster's)."""
        return self.durable_end

    def make_durable(self, offset: int) -> None:
        """fsync the log if record ``offset`` is not durable yet (the journal's writer
        thread only, before the LMDB transaction that applies it)."""
        if offset >= self.durable_end:
            # Appends go on during the fsync and join the next group's.
            self.durable_end = max(self.durable_end, self.log.flush_beside_appends())
        # J1 commit-then-apply: LMDB sees only committed records.
        assert offset < self.applicable_end, (
            f"{self.partition}: journal-log record {offset} would be applied at or above "
            f"the committed end {self.applicable_end}"
        )

    def close(self) -> None:
        """Close the log once the writes under way have queued theirs."""
        with self.order_lock:
            self.recent.forget_partition(self.partition)
            self.log.close()

    # --- replay ---------------------------------------------------------------------

    def _checked_applied_end(self) -> int:
        """The journal offset LMDB applied the partition's log up to (checked against the log)."""
        partition, data_log = self.partition, self.log
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

    def replay(self) -> int:
        """Apply what LMDB has not, below the high watermark (at open, before the log is
        shared); the number of records replayed."""
        replay_from = self.enqueued_end
        wait_replayed(self.enqueue_committed())
        return self.enqueued_end - replay_from  # one record per offset

    def enqueue_committed(self) -> list[PendingWrite]:
        """Queue for LMDB, in order, every record from ``enqueued_end`` below
        ``applicable_end``: a leader's waiting writes from memory (their writers wait for
        them), the others read from the log; those others' pending writes, not waited for
        yet. Called under the order lock, or before the log is shared (open)."""
        high_watermark = self.applicable_end
        unowned: list[PendingWrite] = []
        while self.enqueued_end < high_watermark:
            offset = self.enqueued_end
            waiter = self.pending.pop(offset, None)
            if waiter is not None:
                waiter.pending_write = self._enqueue(offset, waiter.record)
                self.enqueued_end = offset + 1
                continue
            for record_offset, record in read_records(self.log, offset, high_watermark):
                if record_offset in self.pending:
                    break  # a waiting write: from memory, with its waiter told
                unowned.append(self._enqueue(record_offset, record))
                self.enqueued_end = record_offset + 1
                if len(unowned) >= REPLAY_PENDING_MAX:
                    wait_replayed(unowned)  # bounds the queue (and clears the list)
            else:
                # read_records stops early only at the log end: nothing more to queue
                if self.enqueued_end == offset:
                    raise CorruptJournalError(
                        f"{self.partition}: journal-log record {offset} is below the "
                        f"high watermark {high_watermark} but the log {self.log.directory} "
                        f"ends at {self.log.log_end_offset}"
                    )
        return unowned

    def _enqueue(self, offset: int, record: JournalLogRecord) -> PendingWrite:
        return self.local.enqueue_record(
            self.partition,
            offset,
            record,
            lambda: self.make_durable(offset),
            durable_log=self,
        )

    # --- writes ---------------------------------------------------------------------

    def write(
        self, record: JournalLogRecord, on_appended: Callable[[int], None] | None = None
    ) -> Any:
        """Append ``record``, apply it to LMDB, return what its application returned.
        ``on_appended(offset)``: a replicated leader's (``ReplicatedJournalLog.write``);
        one node acknowledges nothing before LMDB applied the record, so it has no use."""
        return self.write_all([record], on_appended)[0]

    def write_all(
        self,
        records: Sequence[JournalLogRecord],
        on_appended: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """``write`` of several records in one hold of the order lock: they are appended
        one after another and join the same write groups, so they share the fsync and the
        LMDB transaction that one of them would take (a copy group's marks). Waits for
        every one; raises the first failure once all are settled, else returns what each
        application returned, in order. ``on_appended``: as ``write``'s, unused here."""
        # In pieces: an ENTRY's batch goes to the file as the producer sent it, uncopied.
        now_ms = int(time.time() * 1000)
        batches = [build_batch_pieces(record, now_ms) for record in records]
        pending_writes: list[PendingWrite] = []
        with self.order_lock:
            if self.needs_repair:
                self._repair()
            for record, batch in zip(records, batches, strict=True):
                failpoints.hit("journal_log.before_append")
                # Built just above, so its CRC is fresh: checking it again would hash every
                # journaled byte a second time. Fsynced by the writer, before applying.
                offset = self.log.append_as_leader(batch, validate=False)
                self._keep_if_entry(offset, record)
                try:
                    failpoints.hit("journal_log.before_apply")
                    pending_writes.append(self._enqueue(offset, record))
                    self.enqueued_end = offset + 1
                except BaseException:
                    # In the log but never queued: every later record would reach LMDB
                    # out of order. The repair cuts it before the next write (a crash
                    # first replays it). Those queued already are settled below.
                    self.needs_repair = True
                    _wait_all(pending_writes)
                    raise
        # A refusal moved the applied offset past the record; a failure did not, and the
        # records queued after it are refused as out of order. Which one it was, the
        # repair reads from LMDB before the next write.
        results, error = _wait_all(pending_writes)
        if error is not None:
            self.needs_repair = True
            raise error
        return results

    def append_durable(self, records: Sequence[JournalLogRecord]) -> Callable[[], list[Any]]:
        """``write_all`` in two halves: the records appended and durable in this log when
        this returns; the function returned waits for what ``write_all`` waits for
        (committed, applied) and returns or raises what it would. Call it exactly once.
        The copier's MARK_APPLYING records, so the copy is appended while they replicate
        (``ReplicatedJournalLog``); on one node the whole write is done here."""
        results = self.write_all(records)
        return lambda: results

    def _keep_if_entry(self, offset: int, record: JournalLogRecord) -> None:
        """An ENTRY just appended at ``offset``: its batch is kept for the copy."""
        if isinstance(record, records.Entry):
            self.recent.put(self.partition, offset, record.transaction_id, record.batch)

    def wait_log_committed(self) -> None:
        """No-op on one node: every record is committed once durable (see the subclass)."""

    def repair(self) -> None:
        """Undo now, not at the next write, the records whose application failed."""
        with self.order_lock:
            if self.needs_repair:
                self._repair()

    def _lmdb_applied_end(self) -> int:
        """LMDB's applied offset for this log once what is queued is done. Under the order
        lock: nothing new is queued for this partition; the no-op waits out the rest."""
        self.local.barrier()
        row = self.local.partition_row(self.partition)
        return self.log.log_start_offset if row is None else row.next_offset

    def _repair(self) -> None:
        """Cut the records LMDB did not apply (their callers all got an error) from the log.
        Called under the order lock."""
        applied_end = self._lmdb_applied_end()
        end = self.log.log_end_offset
        if applied_end < end:
            self.recent.forget_from(self.partition, applied_end)
            self.log.truncate_to(applied_end)
            # The cut records may have been made durable before LMDB failed: the records
            # appended next take their offsets and must be fsynced before they are applied.
            self.durable_end = min(self.durable_end, applied_end)
            self.enqueued_end = min(self.enqueued_end, applied_end)
            log.warning(
                "%s: cut journal-log records %d..%d, whose application failed (their callers "
                "got the error)",
                self.partition,
                applied_end,
                end - 1,
            )
        self.needs_repair = False

    # --- retention ------------------------------------------------------------------

    def apply_retention(self) -> int:
        """Delete the log's segments wholly below ``retention_bound``; how many."""
        with self.order_lock:  # no record is appended or applied meanwhile
            bound = retention_bound(self.local, self.partition)
            # The applied offset just read must be on disk before the records below it go:
            # in the "journal_log" sync mode LMDB commits unsynced, and after a power loss it
            # may come back older and replay from an earlier offset.
            self.local.sync_to_disk()
            return self.log.delete_segments_before(bound)

    # --- reads ----------------------------------------------------------------------

    def logged_batch(self, sequence: int) -> tuple[int, memoryview]:
        """(transaction id, batch) of the ENTRY record at journal offset ``sequence``: what an
        LMDB entry of ENTRY_FORMAT_IN_LOG names. Retention keeps every segment holding an
        entry of an OPEN or APPLYING transaction, the only ones LMDB still has."""
        partition = self.partition
        try:
            chunk = self.log.read(sequence, 1)  # the one batch holding that record
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
                f"journal log ends at {self.log.log_end_offset}; see docs/formats.md, "
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


def retention_bound(local: LocalJournal, partition: str) -> int:
    """Journal-log offset below which no record of ``partition`` is needed any more.

    min(first entry of every OPEN or APPLYING transaction here, LMDB's applied
    offset): an open transaction's entries must survive for its copy (and for a
    rebuild of LMDB from the log), and LMDB may be replayed from its applied offset.
    Read from LMDB alone: the log need not be open.
    """
    applied = local.partition_row(partition)
    bound = 0 if applied is None else applied.next_offset
    for record in local.transactions(partition, PENDING_STATES):
        if record.entry_count:
            bound = min(bound, record.first_sequence)
    return bound


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


def wait_replayed(pending: list[PendingWrite]) -> None:
    """Wait for the applications of records queued from the log (replay, ``commit_to``),
    taking a deterministic refusal as the no-op it was the first time; clears ``pending``."""
    for request in pending:
        try:
            request.wait()
        except DETERMINISTIC_REFUSALS:
            pass  # refused the first time too: a no-op record
    pending.clear()


def _wait_all(pending_writes: list[PendingWrite]) -> tuple[list[Any], BaseException | None]:
    """Wait for every write; (their results, None for a failed one; the first failure)."""
    results: list[Any] = []
    first_error: BaseException | None = None
    for pending in pending_writes:
        try:
            results.append(pending.wait())
        except BaseException as error:
            results.append(None)
            first_error = first_error or error
    return results, first_error
