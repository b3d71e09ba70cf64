"""The write operations of the local data journal, run by its writer thread in a group.

Each operation has two halves, called back to back inside the group's one
LMDB write transaction:

    check(tables)   reads only; raises a TwinlogError to refuse. A refusal fails
                    this caller alone and writes nothing.
    apply(tables)   writes and returns the caller's result. It must not refuse:
                    an error here aborts the whole group (every caller gets it),
                    because LMDB cannot undo one caller's half-done writes.

Both run again, from scratch, if the group is retried after the map grew, so
neither keeps anything from an earlier run. Every state change is checked
against ``VALID_PREVIOUS_STATES``.
"""

from __future__ import annotations

import logging
from array import array
from typing import Any

from twinlog.engine.base.errors import InvalidTxnStateError, TransactionCompletedError
from twinlog.journal.local_format import (
    NO_PREVIOUS,
    VALID_PREVIOUS_STATES,
    CopyRecord,
    CopyState,
    new_copy_record,
    set_entry_previous,
)
from twinlog.journal.local_tables import Tables

log = logging.getLogger(__name__)


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

    def check(self, tables: Tables) -> None:
        raise NotImplementedError

    def apply(self, tables: Tables) -> Any:
        raise NotImplementedError


class _PartitionOperation(Operation):
    def __init__(self, partition: str, transaction_id: int) -> None:
        self.partition = partition
        self.transaction_id = transaction_id
        self.partition_row: tuple[int, int] | None = None
        self.record: CopyRecord | None = None

    def _read(self, tables: Tables) -> None:
        self.partition_row = tables.partition(self.partition)
        self.record = (
            None
            if self.partition_row is None
            else tables.transaction(self.partition_row[0], self.partition, self.transaction_id)
        )

    def _partition_id(self, tables: Tables) -> int:
        """The partition's id, creating its row on first use."""
        if self.partition_row is None:
            partition_id = tables.allocate_partition_id()
            tables.put_partition(self.partition, partition_id, 0)
            self.partition_row = (partition_id, 0)
        return self.partition_row[0]


class AppendEntry(_PartitionOperation):
    """Journal one batch of an OPEN transaction; result: its journal sequence.

    ``value`` is the entry value built by the caller's thread with NO_PREVIOUS
    in the ``previous`` field; only the writer knows the previous entry, so it
    patches those 8 bytes in place rather than building the value again.
    """

    adds_data = True

    def __init__(
        self,
        partition: str,
        transaction_id: int,
        value: bytearray,
        batch_bytes: int,
        record_count: int,
    ) -> None:
        super().__init__(partition, transaction_id)
        self.value = value
        self.size_bytes = batch_bytes
        self.record_count = record_count

    def check(self, tables: Tables) -> None:
        purged_below = tables.purged_below()
        if self.transaction_id < purged_below:
            raise TransactionCompletedError(
                f"transaction {self.transaction_id} is below the journal's purge watermark "
                f"{purged_below} (it is complete); the batch for {self.partition} was not journaled"
            )
        self._read(tables)
        if self.record is not None and self.record.state is not CopyState.OPEN:
            raise TransactionCompletedError(
                f"transaction {self.transaction_id} is {self.record.state.name} on {self.partition}; "
                "a batch arriving after its end is refused and was not journaled"
            )

    def apply(self, tables: Tables) -> int:
        partition_id = self._partition_id(tables)
        assert self.partition_row is not None
        sequence = self.partition_row[1]
        record = self.record or new_copy_record(self.partition, self.transaction_id)
        set_entry_previous(self.value, record.last_sequence)
        tables.put_entry(partition_id, sequence, self.value)
        tables.put_partition(self.partition, partition_id, sequence + 1)
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
    """Record where the copy of an OPEN transaction starts, before any byte is copied.

    Also re-records the start of an APPLYING transaction when the data log came
    back shorter than the recorded start (recovery's BEYOND case).
    """

    def __init__(
        self,
        partition: str,
        transaction_id: int,
        start_offset: int,
        attempts: tuple[bytes, ...] | None,
    ) -> None:
        super().__init__(partition, transaction_id)
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
        tables.put_transaction(self.partition_row[0], record)
        return record


class MarkApplied(_PartitionOperation):
    """Record the copied range and delete the entries, in one transaction.

    ``sequences`` are the entries the copier copied (collected after APPLYING
    froze the chain); they must be exactly the chain the index describes.
    An APPLIED transaction is returned as it is (a duplicate APPLY_COMMIT).
    """

    def __init__(
        self,
        partition: str,
        transaction_id: int,
        first_offset: int,
        next_offset: int,
        sequences: array[int],
    ) -> None:
        super().__init__(partition, transaction_id)
        self.first_offset = first_offset
        self.next_offset = next_offset
        self.sequences = sequences

    def check(self, tables: Tables) -> None:
        self._read(tables)
        if self.record is not None and self.record.state is CopyState.APPLIED:
            return
        _check_transition(self.partition, self.transaction_id, self.record, CopyState.APPLIED)
        expected = 0 if self.record is None else self.record.entry_count
        last = NO_PREVIOUS if self.record is None else self.record.last_sequence
        copied_last = self.sequences[-1] if self.sequences else NO_PREVIOUS
        if len(self.sequences) != expected or copied_last != last:
            raise InvalidTxnStateError(
                f"transaction {self.transaction_id} on {self.partition}: the copy covered "
                f"{len(self.sequences)} entries ending at {copied_last}, the index holds {expected} "
                f"ending at {last}; not recorded as applied"
            )

    def apply(self, tables: Tables) -> CopyRecord:
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
    """Delete the entries and record ABORTED; an ABORTED transaction is returned as it is.

    The walk runs here, in the writer, so an entry appended just before the
    abort is found and deleted with the others: nothing lingers.
    """

    def __init__(self, partition: str, transaction_id: int) -> None:
        super().__init__(partition, transaction_id)
        self.sequences: array[int] = array("Q")

    def check(self, tables: Tables) -> None:
        self._read(tables)
        self.sequences = array("Q")
        if self.record is not None and self.record.state is CopyState.ABORTED:
            return
        _check_transition(self.partition, self.transaction_id, self.record, CopyState.ABORTED)
        if self.record is not None and self.partition_row is not None:
            self.sequences = tables.walk(self.partition_row[0], self.record)

    def apply(self, tables: Tables) -> CopyRecord:
        if self.record is not None and self.record.state is CopyState.ABORTED:
            return self.record
        partition_id = self._partition_id(tables)
        for sequence in self.sequences:
            tables.delete_entry(partition_id, sequence)
        record = self.record or new_copy_record(self.partition, self.transaction_id)
        record = record._replace(state=CopyState.ABORTED)
        tables.put_transaction(partition_id, record)
        return record


class PurgeBelow(Operation):
    """Drop what the coordinator has forgotten: every row (and OPEN entries) below a watermark.

    Result: entries dropped. APPLYING rows are kept whatever their id: a
    decided commit is never dropped (the copier completes it at open).
    The watermark only rises; later appends below it are refused.
    """

    def __init__(self, low_watermark_transaction_id: int) -> None:
        self.low_watermark = low_watermark_transaction_id
        # (partition_id, transaction_id, sequences of its entries) to drop
        self.doomed: list[tuple[int, int, array[int]]] = []

    def check(self, tables: Tables) -> None:
        self.doomed = []
        for name, partition_id, _ in tables.partitions():
            for record in tables.transactions(partition_id, name, below=self.low_watermark):
                if record.state is CopyState.APPLYING:
                    log.warning(
                        "journal purge: transaction %d on %s is APPLYING below the low watermark "
                        "%d; kept for the copier",
                        record.transaction_id,
                        name,
                        self.low_watermark,
                    )
                    continue
                sequences = (
                    tables.walk(partition_id, record)
                    if record.state is CopyState.OPEN
                    else array("Q")
                )
                self.doomed.append((partition_id, record.transaction_id, sequences))

    def apply(self, tables: Tables) -> int:
        entries_dropped = 0
        for partition_id, transaction_id, sequences in self.doomed:
            for sequence in sequences:
                tables.delete_entry(partition_id, sequence)
            entries_dropped += len(sequences)
            tables.delete_transaction(partition_id, transaction_id)
        if self.low_watermark > tables.purged_below():
            tables.put_purged_below(self.low_watermark)
        return entries_dropped

    @property
    def rows_dropped(self) -> int:
        return len(self.doomed)
