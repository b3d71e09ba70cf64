"""The single writer of one partition's data log: plain appends, APPLY_COMMIT, APPLY_ABORT.

Every write to the data log goes through one lock here, so a plain batch can
never land inside a transaction's copy, and a transaction's batches are
contiguous in the log.

APPLY_COMMIT (``apply_commit``):

    1. append MARK_APPLYING(start = log end) to the partition's journal log, durable
       in this replica before a byte is copied (J4); on a cluster leader its replicas'
       wait and its application come after step 3's append, the marks travelling beside
       the copy (docs/formats.md, "A copy beside its marks")
                                                                 -> copier.after_applying_record
    2. walk the reverse links back from the last entry, keeping only the
       journal sequences (8 bytes per entry, never a payload)
    3. stream the batches, in append order, zero-copy from LMDB into ONE
       ``data_log.append_all_as_leader`` (contiguous, one fsync)
                                                                 -> copier.after_batch (each)
                                                                 -> copier.after_log_fsync
       on a cluster leader, wait until the in-sync replicas hold the copy (J4:
       ``wait_replicated``), so a replica that holds APPLIED holds every byte; then
       until step 1's records are committed and applied
    4. append MARK_APPLIED(first, next) and apply it: the entries go in the
       LMDB transaction that records APPLIED                     -> copier.after_applied_record

The copier decides by appending journal-log records; only the journal's applier
changes LMDB (J5).

(There is no ``copier.before_journal_delete``: the delete is in step 4's
LMDB transaction, not a step of its own.) A crash anywhere is resolved at open by
``recover`` with ``twinlog.copier.recovery_table``. Delivering APPLY_COMMIT or
APPLY_ABORT again, or after a restart, answers from the record.

Copy groups (``apply_commits``): the commits queued while a copy runs (any caller's)
are copied together by the next holder of the writer lock: every MARK_APPLYING in one
journal-log write, every batch in one append and one fsync (one replicated wait on a
cluster), every MARK_APPLIED in one write. Each MARK_APPLYING records the start its
transaction's batches will have, right after those of the one before it. A group's
MARK_APPLIED records go in the next group's MARK_APPLYING write (one replicated write
fewer per group; ``copier.after_applied_record`` is hit there too): with ``marks_left``
(a broker's partitions) always, their callers answered once the copy is durable and the
records written by the broker if no group comes within its delay; without it only while
more commits wait, the callers answered after that write.

Invariant (per partition, whenever the writer lock is free; like etcd raft's
``applied <= applying <= committed``):

    the APPLYING transactions are one copy group T1..Tn (n >= 0), each starting where
    the batches T(i-1) chose end; with
        applying_start   = T1's start (the log end when the group was recorded)
        copied_end       = the log end now
        journaled_end    = applying_start + the offsets the group's batches span
    then  applying_start <= copied_end <= journaled_end,
    and the log between applying_start and copied_end is a prefix of the group's
    batches, in order. Recovery (``_copy_group_of``) checks the chain of starts and
    resolves each transaction against the log up to the next one's start.

``check_invariant`` asserts the numbers; ``classify_tail`` checks the prefix.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from itertools import pairwise, takewhile
from typing import cast

from twinlog.copier.marks_left import MarksLeft
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
from twinlog.engine.base.errors import (
    CorruptBatchError,
    CorruptJournalError,
    InvalidTxnStateError,
    TwinlogError,
)
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


@dataclass(frozen=True)
class CommitCall:
    """One APPLY_COMMIT of ``PartitionWriter.apply_commits`` (see ``apply_commit``)."""

    transaction_id: int
    attempts: Iterable[bytes] | None = None
    journaled_entries: int = 0


class _QueuedCalls:
    """One caller's calls in ``apply_commits``; each call's outcome is told (under the
    queue lock) by whichever caller led when it was copied."""

    def __init__(self, calls: list[CommitCall]) -> None:
        self.calls = calls
        self.outcomes: list[tuple[int, int] | BaseException | None] = [None] * len(calls)

    def told(self) -> bool:
        return all(outcome is not None for outcome in self.outcomes)

    def results(self) -> list[tuple[int, int] | BaseException]:
        assert self.told()
        return cast(list[tuple[int, int] | BaseException], self.outcomes)


# A copy group's size at most: its marks are one journal-log batch and its batches one
# append, so a bound keeps both well inside the size limits and one group short.
COPY_GROUP_MAX = 64


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
        marks_left: MarksLeft | None = None,
        marks_beside_copy: Callable[[], bool] | None = None,
    ) -> None:
        """``wait_replicated(end_offset)``: a cluster leader's wait until its in-sync
        replicas hold the data log below ``end_offset`` (raises when they cannot).
        ``on_copied()``: a copy is durable in the data log, before its APPLIED record:
        readers may see it now (a crash before APPLIED resumes the copy over the same
        bytes, at the same offsets), one journal sync sooner. ``marks_left``: a copy is
        answered once durable, its MARK_APPLIED records left for the next copy group's
        write and listed there until written (``twinlog.copier.marks_left``); without
        it they are written before the copy is answered. ``marks_beside_copy()``: the
        group's MARK_APPLYING records replicate while its copy is appended (a cluster
        leader with followers) instead of before (None or False: before)."""
        self.partition = partition
        self.log = data_log
        self.journal = journal
        self.wait_replicated = wait_replicated
        self.on_copied = on_copied
        self._marks_left = marks_left
        self.marks_beside_copy = marks_beside_copy
        # Called when a recovery ends (its half-done copies finished, or none found): the
        # partition lets readers past where such a copy began.
        self.on_recovered: Callable[[], None] | None = None
        self._lock = threading.Lock()
        # Group commit (``apply_commits``). Guarded by the queue lock, never held across a
        # write: the calls waiting to be copied, in arrival order; whether a caller leads
        # (copies the queue, holding the writer lock); and the MARK_APPLIED records of the
        # last group copied, not written yet (each with the call it tells; told already
        # with ``marks_left``), which only the leader or the next one touches, under the
        # writer lock. Invariant: with ``marks_left``, every call in ``_unwritten`` is
        # told and the writer is listed there while ``_unwritten`` is not empty.
        self._queue_changed = threading.Condition(threading.Lock())
        self._queued: list[_QueuedCalls] = []
        self._leading = False
        self._unwritten: list[tuple[tuple[int, int, int], tuple[_QueuedCalls, int]]] = []
        self._needs_recovery = True

    def recover_before_next_write(self) -> None:
        """A replica promoted to leader: finish its half-done copies (J6) before it writes.
        MARK_APPLIED records an earlier term left (told already, with ``marks_left``) are
        dropped: that recovery records APPLIED for every whole copy, in this term."""
        with self._lock:
            self._needs_recovery = True
            if self._marks_left is not None:
                self._take_unwritten()

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
        outcome = self.apply_commits([CommitCall(transaction_id, attempts, journaled_entries)])[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def apply_commits(self, calls: Sequence[CommitCall]) -> list[tuple[int, int] | BaseException]:
        """``apply_commit`` of several transactions, copied in the order given: each call's
        (first, next) offset, or the error it alone raised.

        Group commit across callers (a leader at a time, like a journal's group commit):
        calls queue here, whatever coordinator or lane sends them; one caller at a time
        leads, takes every call queued and copies them (``_apply_queued``), in arrival
        order, as copy groups. Its last group's MARK_APPLIED records are left to the next
        leader (they go in the same journal-log write as that leader's MARK_APPLYING
        records: one replicated write fewer per group while the partition is busy): with
        ``marks_left`` whether or not calls are waiting, their callers answered at once
        (the copies are durable), the records written by the broker if no next group
        comes soon; without it only when calls are waiting, else written at once. Each
        caller returns once its calls' outcomes are known, whoever led.
        """
        request = _QueuedCalls(list(calls))
        with self._queue_changed:
            self._queued.append(request)
        while True:
            with self._queue_changed:
                while not request.told():
                    # Lead when no one does and something waits: calls queued (this
                    # caller's among them at first), or MARK_APPLIED records a leader left
                    # for the next (this caller's, once it led and a caller queued behind;
                    # never with ``marks_left``: those callers were told).
                    untold = self._unwritten and self._marks_left is None
                    if not self._leading and (self._queued or untold):
                        self._leading = True
                        break
                    self._queue_changed.wait()
                else:
                    return request.results()
            with self._leader_turn():
                self._lead()

    @contextlib.contextmanager
    def _leader_turn(self) -> Iterator[None]:
        """A leader's turn, once its caller set ``_leading`` under the queue lock: the
        writer lock for the turn, then leadership given up and the waiting callers woken."""
        try:
            with self._lock:
                yield
        finally:
            with self._queue_changed:
                self._leading = False
                self._queue_changed.notify_all()

    def _lead(self) -> None:
        """One leader's turn (writer lock held): copy every call queued; then leave the
        MARK_APPLIED records unwritten for the next group's write, telling their callers
        (``marks_left``), or write them unless a caller waits to lead next."""
        with self._queue_changed:
            taken, self._queued = self._queued, []
        calls = [(each, index, call) for each in taken for index, call in enumerate(each.calls)]
        self._apply_queued(calls)
        if self._marks_left is not None:
            if self._unwritten:
                self._tell_unwritten()
                self._marks_left.left(self)
            return
        with self._queue_changed:
            waiting = bool(self._queued)
        if not waiting:
            self._write_unwritten_applied()

    def write_marks_left(self) -> None:
        """Write the MARK_APPLIED records left for the next copy group now, unless a copy
        is under way (its leader writes or leaves them). Raises nothing: a failure makes
        the next write recover first (``MarksLeft``'s background round, before a purge)."""
        with self._queue_changed:
            if self._leading or not self._unwritten:
                return
            self._leading = True
        with self._leader_turn():
            self._write_left_applied()

    def _take_unwritten(self) -> list[tuple[tuple[int, int, int], tuple[_QueuedCalls, int]]]:
        """The MARK_APPLIED records left unwritten, now the caller's to write (lock held)."""
        unwritten, self._unwritten = self._unwritten, []
        if unwritten and self._marks_left is not None:
            self._marks_left.written(self)
        return unwritten

    def _tell_unwritten(self) -> None:
        """Tell the callers of the records left unwritten their ranges: their copies are
        durable (and replicated), which is all their answer needs (lock held)."""
        self._tell_untold(self._unwritten)

    def _apply_queued(self, calls: list[tuple[_QueuedCalls, int, CommitCall]]) -> None:
        """Copy ``calls`` (lock held), telling each its outcome. Consecutive OPEN
        transactions are copied as one group (``COPY_GROUP_MAX`` at most): their
        MARK_APPLYING records in one journal-log write (with the MARK_APPLIED records the
        group before left unwritten), their batches in one append with one fsync; their
        MARK_APPLIED records are left unwritten for the next write. The rest (applied,
        aborted, unknown here, a failed copy's) are answered one by one in their place,
        as is a transaction named twice (after the group holding it). Once a group's copy
        fails, it and every call after it get that error (the next write recovers the
        group first)."""
        group: list[tuple[_QueuedCalls, int, CommitCall]] = []
        try:
            if self._needs_recovery:  # else the MARK_APPLIED records left go with the next
                self._write_left_applied()
                self._recover_locked()
            for request, index, call in calls:
                if len(group) >= COPY_GROUP_MAX or any(
                    grouped.transaction_id == call.transaction_id for _, _, grouped in group
                ):
                    self._copy_group(group)
                    group = []
                if any(mark[0] == call.transaction_id for mark, _told in self._unwritten):
                    self._write_unwritten_applied()  # its row must say APPLIED before it is read
                try:
                    record = self.journal.transaction(self.partition, call.transaction_id)
                    self._check_journaled(call.transaction_id, record, call.journaled_entries)
                except TwinlogError as refusal:  # this call's alone
                    self._tell(request, index, refusal)
                    continue
                if record is not None and record.state is CopyState.OPEN:
                    group.append((request, index, call))
                    continue
                self._copy_group(group)  # the group goes first: order is kept
                group = []
                self._write_unwritten_applied()  # before reading or writing anything else
                try:
                    outcome: tuple[int, int] | BaseException = self._apply_settled(
                        call.transaction_id, record
                    )
                except InvalidTxnStateError as refusal:
                    outcome = refusal
                self._tell(request, index, outcome)
            self._copy_group(group)
        except BaseException as error:
            for request, index, _call in calls:  # those not told yet (unwritten: told below)
                if request.outcomes[index] is None and not self._is_unwritten(request, index):
                    self._tell(request, index, error)

    def _is_unwritten(self, request: _QueuedCalls, index: int) -> bool:
        return any(told == (request, index) for _mark, told in self._unwritten)

    def _tell(
        self, request: _QueuedCalls, index: int, outcome: tuple[int, int] | BaseException
    ) -> None:
        with self._queue_changed:
            request.outcomes[index] = outcome
            if request.told():
                self._queue_changed.notify_all()

    def _write_unwritten_applied(self) -> None:
        """Write the MARK_APPLIED records the last group left (lock held), and tell their
        callers not told yet; on failure they get the error and the next write recovers
        first (one told already keeps its answer: its copy is whole, which recovery
        records)."""
        unwritten = self._take_unwritten()
        if not unwritten:
            return
        try:
            self.journal.mark_applied_all(self.partition, [mark for mark, _ in unwritten])
        except BaseException as error:
            self._needs_recovery = True
            self._tell_untold(unwritten, error)
            raise
        failpoints.hit("copier.after_applied_record")
        self._tell_untold(unwritten)

    def _tell_untold(
        self,
        unwritten: list[tuple[tuple[int, int, int], tuple[_QueuedCalls, int]]],
        error: BaseException | None = None,
    ) -> None:
        """Tell each caller of ``unwritten`` not told yet ``error``, or else its range (a
        caller told once keeps its answer)."""
        for (_tid, first, after), (request, index) in unwritten:
            if request.outcomes[index] is None:
                self._tell(request, index, (first, after) if error is None else error)

    def _apply_settled(self, transaction_id: int, record: CopyRecord | None) -> tuple[int, int]:
        """APPLY_COMMIT of a transaction that is not OPEN here (lock held)."""
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
        assert record.state is CopyState.APPLYING, record.state  # a failed copy of this session
        outcome = self._recover_one(record)
        assert outcome.applied_range is not None
        return outcome.applied_range

    def _copy_group(self, group: list[tuple[_QueuedCalls, int, CommitCall]]) -> None:
        """Copy a group of OPEN transactions (lock held): each one's MARK_APPLYING records
        the offset where its batches will start, right after the batches of the one before
        (whose span the journal's headers give), so recovery reads the group as one copy.
        The MARK_APPLIED records the group before left go first in the same write; this
        group's are left unwritten (``_unwritten``) for the next write."""
        if not group:
            return
        marks: list[tuple[int, int, tuple[bytes, ...] | None]] = []
        applying: list[CopyRecord] = []  # each as its MARK_APPLYING will make it
        start = self.log.log_end_offset
        for position, (_request, _index, call) in enumerate(group):
            attempts = None if call.attempts is None else tuple(call.attempts)
            marks.append((call.transaction_id, start, attempts))
            record = self.journal.transaction(self.partition, call.transaction_id)
            assert record is not None and record.state is CopyState.OPEN, record
            applying.append(
                record._replace(state=CopyState.APPLYING, first_offset=start, attempts=attempts)
            )
            if position + 1 < len(group):  # the last one's span is not needed
                start += self._span(record, attempts)
        unwritten = self._take_unwritten()
        # A failed MARK_APPLYING may stay in the journal log (LMDB did not apply it):
        # recovery cuts it before the data log's next write, which a crash would
        # otherwise turn into a foreign tail behind a replayed APPLYING.
        self._needs_recovery = True
        # Beside the copy (followers to replicate to): the marks are durable here, not
        # yet on the others nor applied; the copy is appended meanwhile, and a follower
        # gets the marks no later than the copy ("A copy beside its marks",
        # docs/formats.md). Alone, they are applied first: a restart then has nothing of
        # the copy's to apply before it can open (on a full disk, it could not).
        beside = self.marks_beside_copy is not None and self.marks_beside_copy()
        applied = [mark for mark, _ in unwritten]
        if beside:
            try:
                settle = self.journal.append_marks(self.partition, applied, marks)
            except BaseException as error:
                self._tell_untold(unwritten, error)
                raise
        else:
            self._settle_marks(
                lambda: self.journal.mark_applied_then_applying(self.partition, applied, marks),
                unwritten,
                applying,
            )
        if unwritten:  # the write recorded the group before's APPLIED too
            failpoints.hit("copier.after_applied_record")
        failpoints.hit("copier.after_applying_record")
        try:
            ranges = self._copy(applying, defer_applied=True)
        except BaseException:
            if beside:  # the marks' wait ends too; the copy's failure is the one raised
                with contextlib.suppress(BaseException):
                    self._settle_marks(settle, unwritten, applying)
            raise
        if beside:
            # The copy is on the in-sync replicas, hence its marks too: should this wait
            # fail they commit anyway, and the next write's recovery finds the group
            # APPLYING and whole (``_settle_marks`` asks for it).
            self._settle_marks(settle, unwritten, applying)
        self._unwritten = [
            ((call.transaction_id, *applied_range), (request, index))
            for (request, index, call), applied_range in zip(group, ranges, strict=True)
        ]

    def _settle_marks(
        self,
        settle: Callable[[], list[CopyRecord]],
        unwritten: list[tuple[tuple[int, int, int], tuple[_QueuedCalls, int]]],
        applying: list[CopyRecord],
    ) -> None:
        """Wait for a copy group's marks (``append_marks``): committed and applied as
        ``applying`` says, the group before's callers told (an error: the next write
        recovers first, LMDB may still say OPEN)."""
        try:
            applied = settle()
        except BaseException as error:
            self._needs_recovery = True
            self._tell_untold(unwritten, error)
            raise
        self._tell_untold(unwritten)
        for expected, record in zip(applying, applied, strict=True):
            assert (record.transaction_id, record.first_offset, record.attempts) == (
                expected.transaction_id,
                expected.first_offset,
                expected.attempts,
            ), (expected, record)

    def _span(self, record: CopyRecord, attempts: tuple[bytes, ...] | None) -> int:
        """Offsets the batches an OPEN transaction's commit of ``attempts`` copies span."""
        chosen = record._replace(attempts=attempts)
        sequences = self.journal.sequences(self.partition, record.transaction_id)
        with closing(self.journal.iter_tagged_headers(self.partition, sequences)) as tagged:
            return sum(header.last_offset_delta + 1 for tag, header in tagged if chosen.copies(tag))

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

    def _copy(
        self, records: Sequence[CopyRecord], resume_after: int = 0, *, defer_applied: bool = False
    ) -> list[tuple[int, int]]:
        """Steps 2-4 for a group of APPLYING records whose starts follow each other from
        the log end (one record: a single copy), or, with ``resume_after`` (J6), whose
        first record's first ``resume_after`` chosen batches lie whole in the log from its
        start: the rest are appended after them. Every batch of the group goes in one
        append with one fsync; each record's (first, next) offset, in order."""
        start = records[0].first_offset
        copied_end = self.log.log_end_offset
        assert resume_after > 0 or copied_end == start, (
            f"copy of {records[0].transaction_id} on {self.partition} starts at {start}, "
            f"but the log ends at {copied_end}"
        )
        # From each record as given: a cluster leader's marks may not be applied yet.
        chosen = [self.journal.chosen_sequences(record) for record in records]
        assert resume_after == 0 or resume_after < len(chosen[0]), "batches left to copy"
        chosen[0] = chosen[0][resume_after:]
        # Offsets each record's copied batches span, summed as they pass; the first
        # record's resumed prefix is in the log already.
        spanned = [0] * len(records)
        spanned[0] = copied_end - start
        self._needs_recovery = True  # until APPLIED: if this fails, the next write resumes it
        # Closed here, not when collected: a failed append (a full disk) leaves it suspended
        # inside a journal read, whose read transaction holds the map lock's shared side,
        # and the exception's frames kept it alive (a broker's close then waited forever).
        batches = self._group_batches(records, chosen, spanned)
        try:
            first, next_offset = self.log.append_all_as_leader(
                batches, batch_count=sum(len(sequences) for sequences in chosen)
            )
        except CorruptBatchError as error:  # append_all_as_leader copied nothing
            raise CorruptJournalError(
                f"local data journal {self.journal.directory}: a transaction of "
                f"{[record.transaction_id for record in records]} on {self.partition} holds a "
                f"damaged batch ({error}); nothing of it was copied. LMDB keeps no checksums, "
                "the batch CRC caught it. Stop the broker, copy the journal aside and restore "
                "it from a backup (docs/formats.md, 'Local data journal: Damage')"
            ) from error
        finally:
            batches.close()
        failpoints.hit("copier.after_log_fsync")
        ranges = []
        for record, span in zip(records, spanned, strict=True):
            end = record.first_offset + span
            check_invariant(record.first_offset, end, end)
            ranges.append((record.first_offset, end))
        assert first == copied_end and next_offset == ranges[-1][1]
        if self.wait_replicated is not None:
            self.wait_replicated(next_offset)
        if self.on_copied is not None:
            self.on_copied()
        if defer_applied:
            # Copied and, on a cluster, replicated: only the MARK_APPLIED records are left,
            # which the caller writes with the next write (recovery would record them from
            # the whole copy if they were lost).
            self._needs_recovery = False
            return ranges
        self.journal.mark_applied_all(
            self.partition,
            [
                (record.transaction_id, *applied)
                for record, applied in zip(records, ranges, strict=True)
            ],
        )
        self._needs_recovery = False
        failpoints.hit("copier.after_applied_record")
        return ranges

    def _group_batches(
        self,
        records: Sequence[CopyRecord],
        chosen: list[array[int]],
        spanned: list[int],
    ) -> Generator[memoryview, None, None]:
        """The batches of every record in turn, each record's starting where the one before
        it ended: the offset its MARK_APPLYING recorded (else nothing is kept: the append
        is all or nothing)."""
        offset = records[0].first_offset + spanned[0]
        for position, (record, sequences) in enumerate(zip(records, chosen, strict=True)):
            if offset != record.first_offset + spanned[position]:
                raise CorruptJournalError(
                    f"{self.partition}: the copy group's transaction {record.transaction_id} "
                    f"was recorded APPLYING from offset {record.first_offset}, but the batches "
                    f"before it end at {offset}; nothing of the group was copied"
                )
            with closing(self.journal.iter_batches(self.partition, sequences)) as batches:
                yield from self._counted(batches, spanned, position)
            offset = record.first_offset + spanned[position]

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
    def _counted(
        batches: Iterable[memoryview], spanned: list[int], position: int
    ) -> Iterator[memoryview]:
        for batch in batches:
            if len(batch) < HEADER_BYTES:
                raise CorruptBatchError(f"batch of {len(batch)} bytes is shorter than its header")
            spanned[position] += unpack_header(batch).last_offset_delta + 1
            yield batch
            # Resumed: append_all_as_leader has written this batch (it writes each before
            # asking for the next).
            failpoints.hit("copier.after_batch")

    # --- recovery -----------------------------------------------------------------

    def recover(self) -> list[RecoveryOutcome]:
        """Finish or redo any half-done copy of this partition (see ``twinlog.copier.recovery_table``)."""
        with self._lock:
            self._write_left_applied()
            return self._recover_locked()

    def recover_if_needed(self) -> bool:
        """Recover now (``recover``) if no write has since the promotion (each recovers
        first); True if this call did. The broker's background round calls it for a
        promoted leader that no write reaches (``promotion_recoveries``)."""
        with self._lock:
            if not self._needs_recovery:
                return False
            self._recover_if_needed()
            return True

    def _recover_if_needed(self) -> None:
        self._write_left_applied()
        if self._needs_recovery:
            self._recover_locked()

    def _write_left_applied(self) -> None:
        """Write the MARK_APPLIED records a leader left for the next one when another
        write comes first (lock held). A failure is told to their callers and makes the
        next write recover first."""
        if self._unwritten:
            with contextlib.suppress(Exception):
                self._write_unwritten_applied()

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
        applying = self._copy_group_of(
            self.journal.transactions(self.partition, [CopyState.APPLYING])
        )
        # In order, each bounded by where the next one starts: a whole copy followed by
        # the next one's batches is whole, not a foreign tail.
        outcomes = [
            self._recover_one(record, None if after is None else after.first_offset)
            for record, after in zip(applying, [*applying[1:], None][: len(applying)], strict=True)
        ]
        self._needs_recovery = False
        if self.on_recovered is not None:
            self.on_recovered()
        return outcomes

    def _copy_group_of(self, applying: list[CopyRecord]) -> list[CopyRecord]:
        """The APPLYING records in copy order, checked to be one copy group: each starts
        where the batches of the one before it end (CorruptJournalError if not)."""
        if len(applying) <= 1:
            return applying
        spans = {record.transaction_id: self._chosen_span(record) for record in applying}
        # A transaction that copies nothing starts where the next one does: it goes first.
        ordered = sorted(applying, key=lambda r: (r.first_offset, spans[r.transaction_id] > 0))
        for before, after in pairwise(ordered):
            if before.first_offset + spans[before.transaction_id] != after.first_offset:
                raise CorruptJournalError(
                    f"{self.partition}: {len(applying)} transactions are APPLYING "
                    f"({[r.transaction_id for r in ordered]}), but transaction "
                    f"{after.transaction_id} starts at {after.first_offset}, not where "
                    f"{before.transaction_id}'s batches end "
                    f"({before.first_offset + spans[before.transaction_id]}): they are not one "
                    "copy group, so the journal is damaged or was written by something else"
                )
        return ordered

    def _chosen_span(self, record: CopyRecord) -> int:
        """Offsets the batches an APPLYING record's copy chose span."""
        sequences = self.journal.sequences(self.partition, record.transaction_id, chosen_only=True)
        with closing(self.journal.iter_batch_headers(self.partition, sequences)) as headers:
            return sum(header.last_offset_delta + 1 for header in headers)

    def inspect(self, record: CopyRecord | None) -> Case:
        """The recovery case of a transaction (``record`` None: absent)."""
        return self._inspect(record)[0]

    def _inspect(self, record: CopyRecord | None, end_bound: int | None = None) -> tuple[Case, int]:
        """(recovery case, whole batches of the copy found in the log); ``end_bound``:
        where the next transaction of its copy group starts (the log past it is that
        one's)."""
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
        start, end = record.first_offset, self._bounded_end(end_bound)
        # From the log start if retention deleted the copy's start (classify_tail).
        kept_from = max(start, self.log.log_start_offset)
        log_headers = (
            takewhile(lambda header: header.base_offset < end, self.log.iter_headers(kept_from))
            if kept_from < end
            else iter(())
        )
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

    def _bounded_end(self, end_bound: int | None) -> int:
        end = self.log.log_end_offset
        return end if end_bound is None else min(end, end_bound)

    def _recover_one(self, record: CopyRecord, end_bound: int | None = None) -> RecoveryOutcome:
        case, matched = self._inspect(record, end_bound)
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
            applied = self._copy([record])[0]
        elif row.action is Action.RESUME_COPY:
            log.warning(
                "%s: resuming the copy of transaction %d after its %d batches in the log",
                self.partition,
                record.transaction_id,
                matched,
            )
            applied = self._copy([record], resume_after=matched)[0]
        elif row.action is Action.RESTART_AND_COPY:
            record = self.journal.mark_applying(
                self.partition, record.transaction_id, self.log.log_end_offset
            )
            applied = self._copy([record])[0]
        elif row.action is Action.COPY:
            applied = self._copy([record])[0]
        elif row.action is Action.RECORD_APPLIED:
            # The copy may be whole only in the page cache (the process died before
            # append_all_as_leader's fsync): make it durable before the journal forgets it.
            self.log.flush()
            end = self._bounded_end(end_bound)
            if self.wait_replicated is not None:
                self.wait_replicated(end)
            check_invariant(record.first_offset, end, end)
            applied = self.journal.mark_applied(
                self.partition, record.transaction_id, record.first_offset, end
            ).applied_range
        return RecoveryOutcome(record.transaction_id, case, row, applied)
