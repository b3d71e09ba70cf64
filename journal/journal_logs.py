"""The local data journal as its users see it: a journal log per partition in front of LMDB.

This module is the registry of the broker's journal logs: it opens a partition's log
(replaying into LMDB what LMDB lacks), finds it by partition name, closes it, and
deletes the partition from LMDB; every write of a partition goes through here to its
log, and reads go to LMDB. What it holds apart:

    journal_log.py             one partition's journal log: appends, replay, repair,
                               retention (``JournalLog``)
    journal_log_replicated.py  a cluster partition's (``ReplicatedJournalLog``)
    journal_log_records.py     the records a journal log holds
    local_journal.py           LMDB, the view every log is applied to (``LocalJournal``)

Callers: the broker makes one (``engine/broker/broker.py``); a partition opens and
closes its own log and journals its transactional batches (``engine/broker/partition.py``);
the copier writes its marks (``copier/partition_writer.py``); the scheduler purges.

Thread rule: any thread may call any method. Writes of one partition are ordered by its
log's order lock; reads go to LMDB directly.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

from twinlog.engine.base.errors import (
    NotLeaderOrFollowerError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.journal import journal_log_records as records
from twinlog.journal.journal_log import (
    JOURNAL_LOG_DIRECTORY,
    JOURNAL_LOG_SEGMENT_BYTES,
    JournalLog,
    journal_log_config,
    retention_bound,
)
from twinlog.journal.journal_log_records import make_entry, make_mark_applying
from twinlog.journal.journal_log_replicated import ReplicatedJournalLog
from twinlog.journal.local_format import CopyRecord, CopyState
from twinlog.journal.local_journal import (
    JournalEntry,
    JournalStatistics,
    JournalUsage,
    LocalJournal,
)
from twinlog.journal.recent_entries import RecentEntries

log = logging.getLogger(__name__)


class JournalLogs:
    """Every partition's journal log, applied to the broker's one LMDB (``LocalJournal``).

    Writes take the partition name and return what LMDB's application of their record
    did; reads are ``LocalJournal``'s. A partition's journal log is opened (and replayed
    into LMDB) by ``open_partition`` before any write to it.
    """

    def __init__(self, local: LocalJournal) -> None:
        self.local = local
        self.recent = RecentEntries()  # the ENTRY batches the logs appended lately
        self._logs: dict[str, JournalLog] = {}
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
            journal_log = (
                JournalLog(self.local, partition, data_log, self.recent)
                if wait_committed is None
                else ReplicatedJournalLog(
                    self.local, partition, data_log, wait_committed, self.recent
                )
            )
            replayed = journal_log.replay()
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

    def set_batch_bytes_max(self, partition: str, batch_bytes_max: int) -> None:
        """The topic's max.message.bytes changed: the partition's journal log takes ENTRY
        records of batches up to it from now on (its segment size stays)."""
        data_log = self.journal_log(partition)
        segment_bytes = data_log.config.segment_bytes
        data_log.reconfigure(journal_log_config(batch_bytes_max, segment_bytes))

    def close_partition(self, partition: str) -> None:
        """Close the partition's journal log (its writes finished: the caller stopped them)."""
        with self._logs_lock:
            journal_log = self._logs.pop(partition, None)
        if journal_log is not None:
            journal_log.close()

    def delete_partition(self, partition: str) -> int:
        """Close the journal log and forget the partition in LMDB (its directory is the
        caller's to remove); the entries dropped."""
        self.close_partition(partition)
        return self.local.drop_partition(partition)

    def journal_log(self, partition: str) -> DataLog:
        return self._journal_log(partition).log

    def _journal_log(self, partition: str) -> JournalLog:
        journal_log = self._logs.get(partition)
        if journal_log is None:
            raise UnknownTopicOrPartitionError(
                f"{partition} has no journal log open (the partition is closed or deleted)"
            )
        return journal_log

    def _replicated_log(self, partition: str) -> ReplicatedJournalLog:
        journal_log = self._journal_log(partition)
        assert isinstance(journal_log, ReplicatedJournalLog), (
            f"{partition}: a replication call on an unreplicated journal log"
        )
        return journal_log

    def partitions(self) -> list[str]:
        with self._logs_lock:
            return list(self._logs)

    def _logged_batch(self, partition: str, sequence: int) -> tuple[int, memoryview]:
        """LMDB's reader of batches kept in the journal logs: from memory when the log
        appended it lately (``recent_entries``), else ``JournalLog.logged_batch``."""
        kept = self.recent.get(partition, sequence)
        if kept is not None:
            return kept
        return self._journal_log(partition).logged_batch(sequence)

    # --- writes ---------------------------------------------------------------------

    def _write(
        self,
        partition: str,
        record: records.JournalLogRecord,
        on_appended: Callable[[int], None] | None = None,
    ) -> Any:
        """Append ``record`` to the partition's journal log, apply it, return the result."""
        return self._journal_log(partition).write(record, on_appended)

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
        once durable and applied. Producer id, generation and base sequence default to the
        batch header's. Raises TransactionCompletedError when the transaction is APPLYING,
        APPLIED or ABORTED here, or below the partition's purge watermark.
        ``on_appended``: a replicated leader records the batch's sequence there once it is
        in the log, so a retry after an unanswered wait is a duplicate, never a second entry.
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
        """MARK_APPLYING, durable and applied before the caller copies a byte (J4).

        ``attempts`` (None: all) are the attempt tags the commit copies; untagged
        entries are always copied. Kept in the record, so recovery makes the same
        choice. Re-recording a lower start (the log lost its tail) keeps them.
        """
        return self.mark_applied_then_applying(
            partition, [], [(transaction_id, start_offset, attempts)]
        )[0]

    def mark_applied_then_applying(
        self,
        partition: str,
        applied: Sequence[tuple[int, int, int]],
        applying: Sequence[tuple[int, int, Iterable[bytes] | None]],
    ) -> list[CopyRecord]:
        """The MARK_APPLIED records of one copy group ((transaction id, first, next) each)
        and the MARK_APPLYING records of the next ((transaction id, start, attempts)), in
        that order, in one journal-log write; the APPLYING records, all durable and
        applied (with the APPLIED ones before them) when this returns."""
        written = self._journal_log(partition).write_all(_marks(applied, applying))
        return _applying_records(written[len(applied) :])

    def append_marks(
        self,
        partition: str,
        applied: Sequence[tuple[int, int, int]],
        applying: Sequence[tuple[int, int, Iterable[bytes] | None]],
    ) -> Callable[[], list[CopyRecord]]:
        """``mark_applied_then_applying`` in two halves: the records are durable in this
        replica's journal log when this returns; the function returned (call it exactly
        once) waits until they are committed and applied and returns the APPLYING
        records. On a cluster leader the copy goes in between (J4 as docs/formats.md's
        "A copy beside its marks" says); on one node the whole write is done here."""
        settle = self._journal_log(partition).append_durable(_marks(applied, applying))
        return lambda: _applying_records(settle()[len(applied) :])

    def mark_applied(
        self, partition: str, transaction_id: int, first_offset: int, next_offset: int
    ) -> CopyRecord:
        """MARK_APPLIED(first, next): the entries go, the range is recorded."""
        return self.mark_applied_all(partition, [(transaction_id, first_offset, next_offset)])[0]

    def mark_applied_all(
        self, partition: str, ranges: Sequence[tuple[int, int, int]]
    ) -> list[CopyRecord]:
        """``mark_applied`` of a copy group, (transaction id, first, next offset) each, in
        one journal-log write."""
        written: list[CopyRecord] = self._journal_log(partition).write_all(
            [records.MarkApplied(tid, first, after) for tid, first, after in ranges]
        )
        return written

    def mark_aborted(self, partition: str, transaction_id: int) -> CopyRecord:
        """MARK_ABORTED: the transaction's entries go, ABORTED is recorded."""
        result: CopyRecord = self._write(partition, records.MarkAborted(transaction_id))
        return result

    def purge_partition_below(self, partition: str, low_watermark: int) -> int:
        """A PURGE record on one partition; the entries it dropped. From now on, appends
        for a transaction id below the watermark are refused on this partition."""
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

    def repair(self, partition: str) -> None:
        """Cut the records of the partition's journal log whose application failed now,
        not at its next write: for a caller about to write elsewhere what only holds if
        they never happened (the copier, before it appends to the data log after a
        failed MARK_APPLYING that a crash would otherwise replay)."""
        self._journal_log(partition).repair()

    def wait_log_committed(self, partition: str) -> None:
        """A replicated leader: wait until the in-sync replicas hold the partition's whole
        journal log and LMDB applied it (``ReplicatedJournalLog.wait_log_committed``).
        No-op on one node."""
        self._journal_log(partition).wait_log_committed()

    def wait_applied(self) -> None:
        """Until LMDB applied every record queued so far (of every partition)."""
        self.local.barrier()

    # --- replication (a replicated partition's journal log) ------------------------
    # Each is ``ReplicatedJournalLog``'s; only a cluster partition calls them.

    def high_watermark(self, partition: str) -> int:
        """Below it the partition's records are committed and queued for LMDB."""
        return self._journal_log(partition).high_watermark

    def applicable_end(self, partition: str) -> int:
        """Below it the partition's records are committed (the high watermark may trail it
        while they are queued): what a follower must hold to join the ISR."""
        return self._journal_log(partition).applicable_end

    def become_leader(self, partition: str, leader_epoch: int) -> None:
        self._replicated_log(partition).become_leader(leader_epoch)

    def step_down(self, partition: str) -> None:
        self._replicated_log(partition).step_down()

    def append_replicated(
        self, partition: str, batches: Iterable[memoryview], *, sync: bool
    ) -> None:
        self._replicated_log(partition).append_replicated(batches, sync=sync)

    def commit_to(self, partition: str, high_watermark: int, *, wait: bool = False) -> int:
        return self._replicated_log(partition).commit_to(high_watermark, wait=wait)

    def commits_nothing(self, partition: str, high_watermark: int) -> bool:
        return self._replicated_log(partition).commits_nothing(high_watermark)

    def truncate(self, partition: str, offset: int) -> None:
        self._replicated_log(partition).truncate(offset)

    def restart_at(self, partition: str, offset: int) -> None:
        self._replicated_log(partition).restart_at(offset)

    # --- retention ------------------------------------------------------------------

    def retention_bound(self, partition: str) -> int:
        """Journal-log offset below which no record of the partition is needed any more."""
        return retention_bound(self.local, partition)

    def apply_retention(self, partition: str) -> int:
        """Delete the journal log's segments wholly below ``retention_bound``; how many."""
        return self._journal_log(partition).apply_retention()

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

    def chosen_sequences(self, record: CopyRecord) -> array[int]:
        return self.local.chosen_sequences(record)

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


def _marks(
    applied: Sequence[tuple[int, int, int]],
    applying: Sequence[tuple[int, int, Iterable[bytes] | None]],
) -> Sequence[records.JournalLogRecord]:
    """One copy-group write: the group before's MARK_APPLIED records, then this group's
    MARK_APPLYING records."""
    return [records.MarkApplied(tid, first, after) for tid, first, after in applied] + [
        make_mark_applying(tid, start, attempts) for tid, start, attempts in applying
    ]


def _applying_records(written: Sequence[Any]) -> list[CopyRecord]:
    """What LMDB's application of MARK_APPLYING records returned: APPLYING rows."""
    for record in written:
        assert isinstance(record, CopyRecord) and record.state is CopyState.APPLYING, record
    return list(written)
