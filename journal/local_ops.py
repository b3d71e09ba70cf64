"""The write operations of the local data journal, run by its writer thread in a group.

Each operation applies one record of a partition's journal log (but
``DropPartition``, topic deletion) and has three halves, called inside the
group's one LMDB write transaction:

    check(tables)    reads only; raises a TwinlogError to refuse. A refusal fails
                     this caller alone and writes nothing but ``refused``'s.
    apply(tables)    writes and returns the caller's result. It must not refuse:
                     an error here aborts the whole group (every caller gets it),
                     because LMDB cannot undo one caller's half-done writes.
    refused(tables)  after a refusal of the record itself (not of its place in the
                     order): moves the partition's applied offset past it. A refusal
                     depends only on LMDB's state, which every copy of the journal log
                     reaches alike, so a refused record is a no-op everywhere, and the
                     replay after a crash refuses it again.

Every operation carries its record's journal offset and applies only the
partition's next one (``JournalOrderError`` otherwise): LMDB is the journal
log applied in order, and ``next_offset`` moves in the same transaction as the
change. All three run again, from scratch, if the group is retried after the
map grew, so none keeps anything from an earlier run. Every state change is
checked against ``VALID_PREVIOUS_STATES``.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable
from typing import Any

from twinlog.engine.base.errors import (
    InvalidTxnStateError,
    TransactionCompletedError,
    TwinlogError,
)
from twinlog.journal.local_format import (
    VALID_PREVIOUS_STATES,
    CopyRecord,
    CopyState,
    PartitionRow,
    new_copy_record,
    set_entry_previous,
)
from twinlog.journal.local_tables import Tables

log = logging.getLogger(__name__)


class JournalOrderError(TwinlogError):
    """A journal-log record reached LMDB out of offset order (after an earlier failure).

    The owner of the journal log repairs it (``journal_logs``): it waits for what is
    queued, then cuts the unapplied records from the log, whose callers all failed.
    """


def _state_name(record: CopyRecord | None) -> str:
    return "unknown (no record)" if record is None else record.state.name


def _check_transition(
    partition: str, transaction_id: int, record: CopyRecord | None, wanted: CopyState
) -> None:
    current = None if record is None else record.state
    if current not in VALID_PREVIOUS_STATES[wanted]:
        raise InvalidTxnStateError(
            f"transaction {transaction_id} on {partition} is {_state_name(record)}; it cannot "
            f"become {wanted.name} "
            f"(only from {[s.name if s else 'unknown' for s in VALID_PREVIOUS_STATES[wanted]]})"
        )


class Operation:
    """Base of the write operations. ``size_bytes`` counts toward the group's byte limit."""

    size_bytes = 0
    adds_data = False  # True for appends: they may not grow the map past its limit
    # Set by the journal logs: makes the record durable in its journal log (J1: LMDB
    # applies only what is committed). The writer calls it before the group's LMDB
    # transaction; one fsync of a log covers every record of it appended so far.
    make_durable: Callable[[], None] | None = None
    # The log ``make_durable`` syncs: the writer syncs a group's different logs side by
    # side, and each log's records in order on one thread.
    durable_log: object | None = None

    def check(self, tables: Tables) -> None:
        raise NotImplementedError

    def apply(self, tables: Tables) -> Any:
        raise NotImplementedError

    def refused(self, tables: Tables) -> None:
        """Called after ``check`` refused; writes nothing unless a subclass says so."""


class _PartitionOperation(Operation):
    """The application of the journal-log record at ``journal_offset`` of ``partition``."""

    def __init__(self, partition: str, transaction_id: int, journal_offset: int) -> None:
        self.partition = partition
        self.transaction_id = transaction_id
        self.journal_offset = journal_offset
        self.partition_row: PartitionRow | None = None
        self.record: CopyRecord | None = None
        self._in_order = False

    def _read(self, tables: Tables) -> None:
        """Read the partition's row and the transaction's, after checking the order."""
        self._read_partition(tables)
        row = self.partition_row
        self.record = (
            None
            if row is None
            else tables.transaction(row.partition_id, self.partition, self.transaction_id)
        )

    def _read_partition(self, tables: Tables) -> None:
        """Read the partition's row; refuse a record that is not the next to apply."""
        self._in_order = False
        self.partition_row = tables.partition(self.partition)
        row = self.partition_row
        # A partition without a row starts anywhere: a journal log whose start
        # retention moved on, applied to an empty LMDB (rebuilt from the log).
        if row is not None and row.next_offset != self.journal_offset:
            raise JournalOrderError(
                f"{self.partition}: journal-log record {self.journal_offset} reached the local "
                f"journal, which applies record {row.next_offset} next; not applied"
            )
        self._in_order = True

    def _partition_id(self, tables: Tables) -> int:
        """The partition's id, creating its row on first use."""
        if self.partition_row is None:
            partition_id = tables.allocate_partition_id()
            self.partition_row = PartitionRow(partition_id, self.journal_offset, 0)
            tables.put_partition(self.partition, self.partition_row)
        return self.partition_row.partition_id

    def _advance(self, tables: Tables) -> None:
        """Record the record as applied, in the transaction that applies it."""
        self._partition_id(tables)
        assert self.partition_row is not None
        self.partition_row = self.partition_row._replace(next_offset=self.journal_offset + 1)
        tables.put_partition(self.partition, self.partition_row)

    def refused(self, tables: Tables) -> None:
        if self._in_order:
            self._advance(tables)


class AppendEntry(_PartitionOperation):
    """An ENTRY: journal one batch of an OPEN transaction; result: its sequence.

    The sequence is the record's journal offset, so it is the same on every copy
    of the journal log. ``value`` is the entry value built by the caller's thread
    with NO_PREVIOUS in the ``previous`` field; the writer patches those 8 bytes
    in place (it reads the transaction's row in order) rather than building the
    value again.
    """

    adds_data = True

    def __init__(
        self,
        partition: str,
        transaction_id: int,
        journal_offset: int,
        value: bytearray,
        batch_bytes: int,
        record_count: int,
    ) -> None:
        super().__init__(partition, transaction_id, journal_offset)
        self.value = value
        self.size_bytes = batch_bytes
        self.record_count = record_count

    def check(self, tables: Tables) -> None:
        self._read(tables)
        purged_below = 0 if self.partition_row is None else self.partition_row.purged_below
        if self.transaction_id < purged_below:
            raise TransactionCompletedError(
                f"transaction {self.transaction_id} is below {self.partition}'s purge watermark "
                f"{purged_below} (it is complete); the batch was not journaled"
            )
        if self.record is not None and self.record.state is not CopyState.OPEN:
            raise TransactionCompletedError(
                f"transaction {self.transaction_id} is {self.record.state.name} on {self.partition}; "
                "a batch arriving after its end is refused and was not journaled"
            )

    def apply(self, tables: Tables) -> int:
        partition_id = self._partition_id(tables)
        sequence = self.journal_offset
        record = self.record or new_copy_record(self.partition, self.transaction_id)
        # Entries of one partition stay in increasing sequence order (the walk relies on it).
        assert record.entry_count == 0 or record.last_sequence < sequence
        set_entry_previous(self.value, record.last_sequence)
        tables.put_entry(partition_id, sequence, self.value)
        self._advance(tables)
        tables.put_transaction(
            partition_id,
            record._replace(
                first_sequence=sequence if record.entry_count == 0 else record.first_sequence,
                last_sequence=sequence,
                entry_count=record.entry_count + 1,
                size_bytes=record.size_bytes + self.size_bytes,
                record_count=record.record_count + self.record_count,
            ),
        )
        return sequence


class MarkApplying(_PartitionOperation):
    """MARK_APPLYING: where the copy of an OPEN transaction starts, before any byte is copied.

    Also re-records the start of an APPLYING transaction when the data log came
    back shorter than the recorded start (recovery's BEYOND case).
    """

    def __init__(
        self,
        partition: str,
        transaction_id: int,
        journal_offset: int,
        start_offset: int,
        attempts: tuple[bytes, ...] | None,
    ) -> None:
        super().__init__(partition, transaction_id, journal_offset)
        self.start_offset = start_offset
        self.attempts = attempts

    def check(self, tables: Tables) -> None:
        self._read(tables)
        if self.record is None or self.record.entry_count == 0:
            raise InvalidTxnStateError(
                f"transaction {self.transaction_id} has no entries on {self.partition}; "
                "it applies as empty, without an APPLYING record"
            )
        _check_transition(self.partition, self.transaction_id, self.record, CopyState.APPLYING)
        if (
            self.record.state is CopyState.APPLYING
            and self.start_offset >= self.record.first_offset
        ):
            raise InvalidTxnStateError(
                f"transaction {self.transaction_id} on {self.partition} is APPLYING from offset "
                f"{self.record.first_offset}; it may only restart lower (the log lost its tail), "
                f"not at {self.start_offset}"
            )

    def apply(self, tables: Tables) -> CopyRecord:
        assert self.partition_row is not None and self.record is not None
        attempts = self.attempts if self.record.state is CopyState.OPEN else self.record.attempts
        record = self.record._replace(
            state=CopyState.APPLYING, first_offset=self.start_offset, attempts=attempts
        )
        tables.put_transaction(self.partition_row.partition_id, record)
        self._advance(tables)
        return record


class MarkApplied(_PartitionOperation):
    """MARK_APPLIED: record the copied range and delete the entries, in one transaction.

    The entries are walked here, in the writer (APPLYING froze the chain), so the
    record needs no list of them. An APPLIED transaction is returned as it is (a
    duplicate APPLY_COMMIT).
    """

    def __init__(
        self,
        partition: str,
        transaction_id: int,
        journal_offset: int,
        first_offset: int,
        next_offset: int,
    ) -> None:
        super().__init__(partition, transaction_id, journal_offset)
        self.first_offset = first_offset
        self.next_offset = next_offset
        self.sequences: array[int] = array("Q")

    def check(self, tables: Tables) -> None:
        self._read(tables)
        self.sequences = array("Q")
        if self.record is not None and self.record.state is CopyState.APPLIED:
            return
        _check_transition(self.partition, self.transaction_id, self.record, CopyState.APPLIED)
        if self.record is not None and self.partition_row is not None:
            self.sequences = tables.walk(self.partition_row.partition_id, self.record)

    def apply(self, tables: Tables) -> CopyRecord:
        self._advance(tables)
        if self.record is not None and self.record.state is CopyState.APPLIED:
            return self.record
        partition_id = self._partition_id(tables)
        for sequence in self.sequences:
            tables.delete_entry(partition_id, sequence)
        record = self.record or new_copy_record(self.partition, self.transaction_id)
        record = record._replace(
            state=CopyState.APPLIED,
            first_offset=self.first_offset,
            next_offset=self.next_offset,
        )
        tables.put_transaction(partition_id, record)
        return record


class MarkAborted(_PartitionOperation):
    """MARK_ABORTED: delete the entries and record ABORTED; an ABORTED one is returned as it is.

    The walk runs here, in the writer, so an entry applied just before the
    abort is found and deleted with the others: nothing lingers.
    """

    def __init__(self, partition: str, transaction_id: int, journal_offset: int) -> None:
        super().__init__(partition, transaction_id, journal_offset)
        self.sequences: array[int] = array("Q")

    def check(self, tables: Tables) -> None:
        self._read(tables)
        self.sequences = array("Q")
        if self.record is not None and self.record.state is CopyState.ABORTED:
            return
        _check_transition(self.partition, self.transaction_id, self.record, CopyState.ABORTED)
        if self.record is not None and self.partition_row is not None:
            self.sequences = tables.walk(self.partition_row.partition_id, self.record)

    def apply(self, tables: Tables) -> CopyRecord:
        self._advance(tables)
        if self.record is not None and self.record.state is CopyState.ABORTED:
            return self.record
        partition_id = self._partition_id(tables)
        for sequence in self.sequences:
            tables.delete_entry(partition_id, sequence)
        record = self.record or new_copy_record(self.partition, self.transaction_id)
        record = record._replace(state=CopyState.ABORTED)
        tables.put_transaction(partition_id, record)
        return record


class PurgeBelow(_PartitionOperation):
    """PURGE: drop what the coordinators have forgotten, on one partition.

    Every row (and OPEN entries) below the watermark goes. Result: entries
    dropped. APPLYING rows are kept whatever their id: a decided commit is never
    dropped (the copier completes it at open). The partition's watermark only
    rises; later appends below it are refused.
    """

    def __init__(self, partition: str, low_watermark: int, journal_offset: int) -> None:
        super().__init__(partition, -1, journal_offset)
        self.low_watermark = low_watermark
        # (transaction_id, sequences of its entries) to drop
        self.doomed: list[tuple[int, array[int]]] = []

    def check(self, tables: Tables) -> None:
        self._read_partition(tables)
        self.doomed = []
        row = self.partition_row
        if row is None:
            return
        for record in tables.transactions(row.partition_id, self.partition, self.low_watermark):
            if record.state is CopyState.APPLYING:
                log.warning(
                    "journal purge: transaction %d on %s is APPLYING below the low watermark "
                    "%d; kept for the copier",
                    record.transaction_id,
                    self.partition,
                    self.low_watermark,
                )
                continue
            sequences = (
                tables.walk(row.partition_id, record)
                if record.state is CopyState.OPEN
                else array("Q")
            )
            self.doomed.append((record.transaction_id, sequences))

    def apply(self, tables: Tables) -> int:
        partition_id = self._partition_id(tables)
        entries_dropped = 0
        for transaction_id, sequences in self.doomed:
            for sequence in sequences:
                tables.delete_entry(partition_id, sequence)
            entries_dropped += len(sequences)
            tables.delete_transaction(partition_id, transaction_id)
        self._advance(tables)
        assert self.partition_row is not None
        if self.low_watermark > self.partition_row.purged_below:
            self.partition_row = self.partition_row._replace(purged_below=self.low_watermark)
            tables.put_partition(self.partition, self.partition_row)
        return entries_dropped

    @property
    def rows_dropped(self) -> int:
        return len(self.doomed)


class Barrier(Operation):
    """Changes nothing: the writer runs requests in order, so when it is done, every
    request queued before it is done too."""

    def check(self, tables: Tables) -> None:
        pass

    def apply(self, tables: Tables) -> None:
        return None


class DropPartition(Operation):
    """Forget a deleted partition: its entries, rows, and applied offset (its journal log
    is deleted with its directory). Result: entries dropped."""

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.row: PartitionRow | None = None

    def check(self, tables: Tables) -> None:
        self.row = tables.partition(self.partition)

    def apply(self, tables: Tables) -> int:
        if self.row is None:
            return 0
        for record in tables.transactions(self.row.partition_id, self.partition):
            tables.delete_transaction(self.row.partition_id, record.transaction_id)
        dropped = tables.delete_entries(self.row.partition_id)
        tables.delete_partition(self.partition)
        return dropped
