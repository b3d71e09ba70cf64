"""The single writer of one partition's data log: plain appends, APPLY_COMMIT, APPLY_ABORT.

Every write to the data log goes through one lock here, so a plain batch can
never land inside a transaction's copy, and a transaction's batches are
contiguous in the log.

APPLY_COMMIT (``apply_commit``):

    1. append MARK_APPLYING(start = log end) to the partition's journal log and
       apply it (J4: durable and applied before a byte is copied)
                                                                 -> copier.after_applying_record
    2. walk the reverse links back from the last entry, keeping only the
       journal sequences (8 bytes per entry, never a payload)
    3. stream the batches, in append order, zero-copy from LMDB into ONE
       ``data_log.append_all_as_leader`` (contiguous, one fsync)
                                                                 -> copier.after_batch (each)
                                                                 -> copier.after_log_fsync
       on a cluster leader, wait until the in-sync replicas hold the copy (J4:
       ``wait_replicated``), so a replica that holds APPLIED holds every byte
    4. append MARK_APPLIED(first, next) and apply it: the entries go in the
       LMDB transaction that records APPLIED                     -> copier.after_applied_record

The copier decides by appending journal-log records; only the journal's applier
changes LMDB (J5).

(There is no ``copier.before_journal_delete``: the delete is in step 4's
LMDB transaction, not a step of its own.) A crash anywhere is resolved at open by
``recover`` with ``twinlog.copier.recovery_table``. Delivering APPLY_COMMIT or
APPLY_ABORT again, or after a restart, answers from the record.

Invariant (per partition, whenever the writer lock is free; like etcd raft's
``applied <= applying <= committed``):

    at most one transaction is APPLYING, and if one is, with
        applying_start   = the log end when APPLYING was recorded
        copied_end       = the log end now
        journaled_end    = applying_start + the offsets its journaled batches span
    then  applying_start <= copied_end <= journaled_end,
    and the log between applying_start and copied_end is a prefix of its batches.

``check_invariant`` asserts the numbers; ``classify_tail`` checks the prefix.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass

from twinlog.copier.recovery_table import (
    Action,
    Case,
    ChainState,
    CopyRecordState,
    Row,
    TailState,
    lookup,
)
from twinlog.copier.tail import classify_tail
from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptBatchError, CorruptJournalError, InvalidTxnStateError
from twinlog.engine.log import DataLog
from twinlog.engine.records.batch_format import HEADER_BYTES, BatchHeader, unpack_header
from twinlog.journal import CopyRecord, CopyState, JournalLogs

log = logging.getLogger(__name__)


def check_invariant(applying_start: int, copied_end: int, journaled_end: int) -> None:
    assert applying_start <= copied_end <= journaled_end, (
        f"copier invariant broken: applying_start {applying_start} <= copied_end {copied_end} "
        f"<= journaled_end {journaled_end} does not hold"
    )


@dataclass(frozen=True)
class RecoveryOutcome:
    """What ``recover`` did with one APPLYING transaction."""

    transaction_id: int
    case: Case
    row: Row
    applied_range: tuple[int, int] | None


class PartitionWriter:
    """The one writer of a partition's data log and of its transactions' copies.

    Thread rule: any thread may call any method; one lock serializes them all
    (plain appends, copies, aborts, recovery). ``transaction_headers`` reads
    only. ``recover`` runs once at open; any write also runs it first if it has
    not run, or if an earlier copy failed half-way (e.g. a full disk), so a
    half-done copy is always finished before anything else is appended.
    """

    def __init__(
        self,
        partition: str,
        data_log: DataLog,
        journal: JournalLogs,
        wait_replicated: Callable[[int], None] | None = None,
        on_copied: Callable[[], None] | None = None,
    ) -> None:
        """``wait_replicated(end_offset)``: a cluster leader's wait until its in-sync
        replicas hold the data log below ``end_offset`` (raises when they cannot).
        ``on_copied()``: a copy is durable in the data log, before its APPLIED record:
        readers may see it now (a crash before APPLIED resumes the copy over the same
        bytes, at the same offsets), one journal sync sooner."""
        self.partition = partition
        self.log = data_log
        self.journal = journal
        self.wait_replicated = wait_replicated
        self.on_copied = on_copied
        # Called when a recovery ends (its half-done copies finished, or none found): the
        # partition lets readers past where such a copy began.
        self.on_recovered: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._needs_recovery = True

    def recover_before_next_write(self) -> None:
        """A replica promoted to leader: finish its half-done copies (J6) before it writes."""
        with self._lock:
            self._needs_recovery = True

    # --- writes -------------------------------------------------------------------

    def append_plain(
        self, batch: bytes | memoryview, *, validate: bool = True, defer_flush: bool = False
    ) -> int:
        """Append a non-transactional batch to the data log; its base offset.

        ``validate=False``: the caller checked the CRC already; ``defer_flush``: the caller
        makes it durable (see DataLog.append_as_leader).
        """
        with self._lock:
            self._recover_if_needed()
            return self.log.append_as_leader(batch, validate=validate, defer_flush=defer_flush)

    def apply_commit(
        self,
        transaction_id: int,
        attempts: Iterable[bytes] | None = None,
        journaled_entries: int = 0,
    ) -> tuple[int, int]:
        """Copy the transaction's batches into the data log, exactly once; (first, next) offset.

        ``attempts`` (None: all) chooses the attempt tags whose batches are
        copied; untagged batches are always copied, the others are dropped with
        the entries. The choice is recorded with APPLYING; a redelivery that names
        other attempts gets the recorded choice. An APPLIED transaction returns
        its recorded range; one unknown here (the producer wrote nothing to this
        partition) applies as empty at the log end and is recorded so. An
        ABORTED one raises InvalidTxnStateError.

        ``journaled_entries`` is how many entries the coordinator's decision saw
        here (0: it did not count them). If the journal now holds fewer, or no
        record, it lost them (LMDB keeps no checksums): CorruptJournalError, and
        nothing is copied or recorded, rather than a silently shorter commit.
        """
        with self._lock:
            self._recover_if_needed()
            record = self.journal.transaction(self.partition, transaction_id)
            self._check_journaled(transaction_id, record, journaled_entries)
            if record is None:
                end = self.log.log_end_offset
                applied = self.journal.mark_applied(self.partition, transaction_id, end, end)
                return applied.applied_range
            if record.state is CopyState.APPLIED:
                return record.applied_range
            if record.state is CopyState.ABORTED:
                raise InvalidTxnStateError(
                    f"transaction {transaction_id} is ABORTED on {self.partition}; APPLY_COMMIT "
                    "would make it APPLIED (only from OPEN or APPLYING)"
                )
            if record.state is CopyState.APPLYING:  # a failed copy of this session
                outcome = self._recover_one(record)
                assert outcome.applied_range is not None
                return outcome.applied_range
            # A failed MARK_APPLYING may stay in the journal log (LMDB did not apply it):
            # recovery cuts it before the data log's next write, which a crash would
            # otherwise turn into a foreign tail behind a replayed APPLYING.
            self._needs_recovery = True
            record = self.journal.mark_applying(
                self.partition, transaction_id, self.log.log_end_offset, attempts
            )
            failpoints.hit("copier.after_applying_record")
            return self._copy(record)

    def apply_abort(self, transaction_id: int) -> None:
        """Delete the transaction's entries and record ABORTED; nothing is copied.

        Idempotent; an APPLYING or APPLIED transaction raises InvalidTxnStateError.
        """
        with self._lock:
            self._recover_if_needed()
            record = self.journal.transaction(self.partition, transaction_id)
            if record is not None and record.state in (
                CopyState.APPLYING,
                CopyState.APPLIED,
            ):
                raise InvalidTxnStateError(
                    f"transaction {transaction_id} is {record.state.name} on {self.partition}; "
                    "APPLY_ABORT would make it ABORTED (only from OPEN or unknown)"
                )
            if record is None or record.state is not CopyState.ABORTED:
                self.journal.mark_aborted(self.partition, transaction_id)

    # --- reads --------------------------------------------------------------------

    def transaction_headers(self, transaction_id: int) -> Iterator[BatchHeader]:
        """Headers of the transaction's journaled batches, in append order (streamed)."""
        sequences = self.journal.sequences(self.partition, transaction_id)
        with closing(self.journal.iter_batch_headers(self.partition, sequences)) as headers:
            yield from headers

    # --- the copy -----------------------------------------------------------------

    def _copy(self, record: CopyRecord, resume_after: int = 0) -> tuple[int, int]:
        """Steps 2-4 for an APPLYING record whose start is the log end, or, with
        ``resume_after`` (J6), whose first ``resume_after`` chosen batches lie whole in
        the log from its start: the rest are appended after them."""
        start = record.first_offset
        copied_end = self.log.log_end_offset
        assert resume_after > 0 or copied_end == start, (
            f"copy of {record.transaction_id} on {self.partition} starts at {start}, "
            f"but the log ends at {copied_end}"
        )
        chosen = self.journal.sequences(
            self.partition, record.transaction_id, chosen_only=record.attempts is not None
        )
        assert resume_after < len(chosen), "a resumed copy has batches left to copy"
        spanned = [copied_end - start]  # offsets the copied batches span, summed as they pass
        self._needs_recovery = True  # until APPLIED: if this fails, the next write resumes it
        try:
            left = chosen[resume_after:]
            with closing(self.journal.iter_batches(self.partition, left)) as batches:
                # One batch (one send_batch per partition) needs no append-in-progress mark.
                first, next_offset = self.log.append_all_as_leader(
                    self._counted(batches, spanned), batch_count=len(left)
                )
        except CorruptBatchError as error:  # append_all_as_leader copied nothing
            raise CorruptJournalError(
                f"local data journal {self.journal.directory}: transaction "
                f"{record.transaction_id} on {self.partition} holds a damaged batch ({error}); "
                "nothing of it was copied. LMDB keeps no checksums, the batch CRC caught it. "
                "Stop the broker, copy the journal aside and restore it from a backup "
                "(docs/formats.md, 'Local data journal: Damage')"
            ) from error
        failpoints.hit("copier.after_log_fsync")
        check_invariant(start, next_offset, start + spanned[0])
        assert first == copied_end and next_offset == start + spanned[0]
        if self.wait_replicated is not None:
            self.wait_replicated(next_offset)
        if self.on_copied is not None:
            self.on_copied()
        self.journal.mark_applied(self.partition, record.transaction_id, start, next_offset)
        self._needs_recovery = False
        failpoints.hit("copier.after_applied_record")
        return start, next_offset

    def _check_journaled(
        self, transaction_id: int, record: CopyRecord | None, journaled_entries: int
    ) -> None:
        unapplied = record is None or record.state in (
            CopyState.OPEN,
            CopyState.APPLYING,
        )
        held = 0 if record is None else record.entry_count
        if unapplied and held < journaled_entries:
            raise CorruptJournalError(
                f"local data journal {self.journal.directory}: committed transaction "
                f"{transaction_id} held {journaled_entries} entries on {self.partition} when it "
                f"was committed, the journal now has {held if record else 'no record of it'}. "
                "The journal was damaged; nothing was copied. Stop the broker, copy the journal "
                "aside and restore it from a backup (docs/formats.md, 'Local data journal: Damage')"
            )

    @staticmethod
    def _counted(batches: Iterable[memoryview], spanned: list[int]) -> Iterator[memoryview]:
        for batch in batches:
            if len(batch) < HEADER_BYTES:
                raise CorruptBatchError(f"batch of {len(batch)} bytes is shorter than its header")
            spanned[0] += unpack_header(batch).last_offset_delta + 1
            yield batch
            # Resumed: append_all_as_leader has written this batch (it writes each before
            # asking for the next).
            failpoints.hit("copier.after_batch")

    # --- recovery -----------------------------------------------------------------

    def recover(self) -> list[RecoveryOutcome]:
        """Finish or redo any half-done copy of this partition (see ``twinlog.copier.recovery_table``)."""
        with self._lock:
            return self._recover_locked()

    def _recover_if_needed(self) -> None:
        if self._needs_recovery:
            self._recover_locked()

    def _recover_locked(self) -> list[RecoveryOutcome]:
        # First cut the marks whose application failed: LMDB's APPLYING rows, read
        # next, are then all the journal log will ever say, and a crash replays no other.
        self.journal.repair(self.partition)
        # A replicated log cannot cut them (other replicas may hold them): wait until the
        # whole log is committed and applied, so a MARK_APPLYING whose wait failed shows
        # here now. Else the next copy began beside it, and once both marks committed the
        # partition held two APPLYING transactions and refused every copy (found by the
        # 1,000-fault nemesis run).
        self.journal.wait_log_committed(self.partition)
        applying = self.journal.transactions(self.partition, [CopyState.APPLYING])
        if len(applying) > 1:
            raise CorruptJournalError(
                f"{self.partition}: {len(applying)} transactions are APPLYING "
                f"({[r.transaction_id for r in applying]}); the copier applies one at a time, so "
                "the journal is damaged or was written by something else"
            )
        outcomes = [self._recover_one(record) for record in applying]
        self._needs_recovery = False
        if self.on_recovered is not None:
            self.on_recovered()
        return outcomes

    def inspect(self, record: CopyRecord | None) -> Case:
        """The recovery case of a transaction (``record`` None: absent)."""
        return self._inspect(record)[0]

    def _inspect(self, record: CopyRecord | None) -> tuple[Case, int]:
        """(recovery case, whole batches of the copy found in the log)."""
        if record is None:
            return Case(CopyRecordState.ABSENT, ChainState.INTACT, TailState.EMPTY), 0
        state = CopyRecordState[record.state.name]
        try:
            sequences = self.journal.sequences(
                self.partition, record.transaction_id, chosen_only=True
            )
        except CorruptJournalError:
            return Case(state, ChainState.BROKEN, TailState.FOREIGN), 0
        if record.state is not CopyState.APPLYING:
            return Case(state, ChainState.INTACT, TailState.EMPTY), 0
        start, end = record.first_offset, self.log.log_end_offset
        # From the log start if retention deleted the copy's start (classify_tail).
        kept_from = max(start, self.log.log_start_offset)
        log_headers = self.log.iter_headers(kept_from) if kept_from < end else iter(())
        with closing(self.journal.iter_batch_headers(self.partition, sequences)) as journal_headers:
            tail, matched = classify_tail(
                start, self.log.log_start_offset, end, log_headers, journal_headers
            )
        if tail is TailState.PREFIX and self.log.recovery_report.bytes_truncated:
            # The log's recovery cut a torn batch at its end when it opened: ours, since
            # the copy was the last write. Its whole batches were never fsynced as a
            # copy; J6 resumes only after batches that ended on a boundary.
            tail = TailState.TORN
        return Case(state, ChainState.INTACT, tail), matched

    def _recover_one(self, record: CopyRecord) -> RecoveryOutcome:
        case, matched = self._inspect(record)
        row = lookup(case)
        log.info(
            "%s: transaction %d is %s, chain %s, log tail %s: row %r -> %s",
            self.partition,
            record.transaction_id,
            case.record.value,
            case.chain.value,
            case.tail.value,
            row.name,
            row.action.value,
        )
        applied: tuple[int, int] | None = None
        if row.action is Action.REFUSE:
            log_start_offset = self.log.log_start_offset
            lost_start = (
                f" Retention deleted offsets {record.first_offset}..{log_start_offset} of the "
                "copy, so only a whole copy could be recognised, and this one is not."
                if record.first_offset < log_start_offset
                else ""
            )
            raise CorruptJournalError(
                f"{self.partition}: transaction {record.transaction_id} is APPLYING from offset "
                f"{record.first_offset} (log end {self.log.log_end_offset}), chain {case.chain.value}, "
                f"log tail {case.tail.value}: {row.why}.{lost_start} Copy the partition directory "
                "and the journal aside before changing anything"
            )
        if row.action is Action.TRUNCATE_AND_COPY:
            removed_bytes = self.log.truncate_to(record.first_offset)
            log.warning(
                "%s: cut %d bytes of a torn copy at offset %d",
                self.partition,
                removed_bytes,
                record.first_offset,
            )
            applied = self._copy(record)
        elif row.action is Action.RESUME_COPY:
            log.warning(
                "%s: resuming the copy of transaction %d after its %d batches in the log",
                self.partition,
                record.transaction_id,
                matched,
            )
            applied = self._copy(record, resume_after=matched)
        elif row.action is Action.RESTART_AND_COPY:
            record = self.journal.mark_applying(
                self.partition, record.transaction_id, self.log.log_end_offset
            )
            applied = self._copy(record)
        elif row.action is Action.COPY:
            applied = self._copy(record)
        elif row.action is Action.RECORD_APPLIED:
            # The copy may be whole only in the page cache (the process died before
            # append_all_as_leader's fsync): make it durable before the journal forgets it.
            self.log.flush()
            end = self.log.log_end_offset
            if self.wait_replicated is not None:
                self.wait_replicated(end)
            check_invariant(record.first_offset, end, end)
            applied = self.journal.mark_applied(
                self.partition, record.transaction_id, record.first_offset, end
            ).applied_range
        return RecoveryOutcome(record.transaction_id, case, row, applied)
