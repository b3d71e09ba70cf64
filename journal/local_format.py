"""The on-disk layout of the local data journal: one LMDB environment per data directory.

``DATA_DIR/journal/`` holds ``data.mdb`` and ``lock.mdb`` (LMDB's own) and
``twinlog.lock`` (our exclusive flock: one broker per journal). The environment
has four named databases. All integers are big-endian, so LMDB's bytewise key
order is numeric order.

    partitions    key   name            UTF-8 bytes, 1..255 ("orders-0")
                  value partition_id    u32   short id used in every other key, never reused
                        next_offset     u64   journal-log offset of the next record to apply:
                                              every record below it is applied (written in the
                                              same LMDB transaction as what it applied)
                        purged_below    i64   every transaction id below it is complete here;
                                              appends for such ids are refused (PURGE records)

    entries       key   partition_id    u32
                        sequence        u64   journal sequence = the ENTRY's journal-log
                                              offset, increasing per partition
                  value format          u8    ENTRY_FORMAT_IN_LOG (2): the batch is not here
                                              but in the partition's journal log, in the
                                              ENTRY record at journal offset ``sequence``;
                                              ENTRY_FORMAT_INLINE (1, older journals, and a
                                              LocalJournal used without journal logs): the
                                              batch follows the attempt tag
                        transaction_id  i64
                        previous        u64   sequence of the transaction's previous entry
                                              on this partition, NO_PREVIOUS if first
                        producer_id     i64   copied from the batch header (the batch is
                        generation      i32   kept whole below; these make the walk and
                        base_sequence   i32   the recovery comparison cheap)
                        attempt_length  u16
                        attempt         bytes attempt tag (empty by default; a writer may tag
                                              batches with a task attempt and later commit
                                              only chosen attempts)
                        batch           bytes format 1 only: the record batch as received
                                              (to the end)

    transactions  key   partition_id    u32
                        transaction_id  u64   (ids are >= 0, so u64 order is numeric order)
                  value state           u8    1 OPEN, 2 APPLYING, 3 APPLIED, 4 ABORTED
                        first_sequence  u64   first entry (NO_PREVIOUS if none)
                        last_sequence   u64   last entry: where the reverse walk starts
                        entry_count     u32
                        size_bytes      u64   sum of the batches' bytes
                        record_count    u64   sum of the batches' record counts
                        first_offset    i64   APPLYING: log end when the copy began
                                              APPLIED: offset of the first copied record
                                              else NO_OFFSET (-1)
                        next_offset     i64   APPLIED: offset after the last copied record,
                                              else NO_OFFSET
                        (then, only when the commit chose attempts; absent = every entry)
                        attempt_count   u16   APPLYING/APPLIED: the attempts chosen; entries
                        (attempt_length u16,  tagged with another attempt are dropped, not
                         attempt bytes)*      copied; untagged entries are always copied.
                                              Kept so that recovery after a crash compares
                                              the log with the same choice.

    meta          key   b"format"       value u32  LAYOUT_VERSION
                  key   b"next_partition_id"  value u32

LMDB is a view of the partitions' journal logs (``journal/journal_log_records.py``):
every write applies one journal-log record, in offset order, and moves the
partition's ``next_offset`` past it in the same LMDB transaction. Layout 1 (LMDB
alone, sequences assigned by LMDB) is refused: it has no journal logs to replay.

Why named databases with a short partition id, not one database keyed by the
partition name: keys stay 12 bytes whatever the topic name (LMDB keys are at
most 511 bytes, and short keys keep more of them per page), a partition's
entries are one contiguous key range, and the set of databases is fixed
(``max_dbs`` must be fixed at open), so adding a partition never needs a
reopen. ``docs/formats.md (Local data journal)`` has a worked byte-by-byte example.

States of a transaction on one partition (each lists its valid previous states):

    OPEN       <- (none)          entries are appended; the only state that accepts them
    APPLYING   <- OPEN            the copier recorded where the copy starts (synced) before
                                  copying a byte; entries frozen
               <- APPLYING        only to a lower start: the data log came back shorter
                                  than the recorded start (it lost an unsynced tail)
    APPLIED    <- APPLYING, (none)  entries deleted in the same txn; (none): the producer
                                  wrote nothing here, the commit applies as empty
    ABORTED    <- OPEN, (none)    entries deleted in the same txn
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from twinlog.engine.base.errors import CorruptJournalError

# 2: LMDB is applied from per-partition journal logs (entry sequence = journal offset), and
# entries hold batches in Kafka's 61-byte RecordBatch v2 layout. 1 (LMDB the only copy,
# 67-byte batches with a transaction id in the header) is refused.
LAYOUT_VERSION = 2
# An entry holds its batch (1), or names it by its sequence in the journal log (2): the
# journal log is the durable copy already, so LMDB need not hold the bytes a second time
# (one write of every journaled byte instead of two). Both are read; 2 is written.
ENTRY_FORMAT_INLINE = 1
ENTRY_FORMAT_IN_LOG = 2
ENTRY_FORMATS = (ENTRY_FORMAT_INLINE, ENTRY_FORMAT_IN_LOG)

DB_PARTITIONS = b"partitions"
DB_ENTRIES = b"entries"
DB_TRANSACTIONS = b"transactions"
DB_META = b"meta"
DATABASE_NAMES = (DB_PARTITIONS, DB_ENTRIES, DB_TRANSACTIONS, DB_META)
MAX_DBS = 8  # the four above plus room for a later version; fixed at open

META_FORMAT = b"format"

NO_PREVIOUS = (1 << 64) - 1  # sentinel for "no previous entry"; sequences start at 0
NO_OFFSET = -1
PARTITION_NAME_BYTES_MAX = 255
ATTEMPT_BYTES_MAX = (1 << 16) - 1
U32_MAX = (1 << 32) - 1

PARTITION_VALUE = struct.Struct(
    ">"
    "I"  # partition_id
    "Q"  # next_offset (journal log)
    "q"  # purged_below
)
ENTRY_KEY = struct.Struct(
    ">"
    "I"  # partition_id
    "Q"  # sequence
)
ENTRY_HEADER = struct.Struct(
    ">"
    "B"  # format
    "q"  # transaction_id
    "Q"  # previous
    "q"  # producer_id
    "i"  # producer_generation
    "i"  # base_sequence
    "H"  # attempt_length
)
TRANSACTION_KEY = struct.Struct(
    ">"
    "I"  # partition_id
    "Q"  # transaction_id
)
ATTEMPT_COUNT = struct.Struct(">H")
ATTEMPT_LENGTH = struct.Struct(">H")
TRANSACTION_VALUE = struct.Struct(
    ">"
    "B"  # state
    "Q"  # first_sequence
    "Q"  # last_sequence
    "I"  # entry_count
    "Q"  # size_bytes
    "Q"  # record_count
    "q"  # first_offset
    "q"  # next_offset
)
META_U32 = struct.Struct(">I")
META_I64 = struct.Struct(">q")
assert PARTITION_VALUE.size == 20 and ENTRY_KEY.size == 12 and TRANSACTION_KEY.size == 12
assert ENTRY_HEADER.size == 35 and TRANSACTION_VALUE.size == 53


class CopyState(IntEnum):
    OPEN = 1
    APPLYING = 2
    APPLIED = 3
    ABORTED = 4


# state -> states it may be entered from (None: no record yet). The journal's
# write operations check this table, never ad-hoc conditions.
VALID_PREVIOUS_STATES: dict[CopyState, tuple[CopyState | None, ...]] = {
    CopyState.OPEN: (None,),
    CopyState.APPLYING: (CopyState.OPEN, CopyState.APPLYING),
    CopyState.APPLIED: (CopyState.APPLYING, None),
    CopyState.ABORTED: (CopyState.OPEN, None),
}


class EntryHeader(NamedTuple):
    """The fixed part of an entry value, plus where the attempt and the batch lie in it."""

    transaction_id: int
    previous: int
    producer_id: int
    producer_generation: int
    base_sequence: int
    attempt_length: int
    # The batch is in the journal log (ENTRY_FORMAT_IN_LOG), not after the attempt tag.
    batch_in_log: bool = False

    @property
    def batch_position(self) -> int:
        """Byte position of the batch inside an inline entry value (where its attempt tag
        ends, in either format)."""
        return ENTRY_HEADER.size + self.attempt_length


class CopyRecord(NamedTuple):
    """One row of the transaction index: a transaction on one partition."""

    partition: str
    transaction_id: int
    state: CopyState
    first_sequence: int
    last_sequence: int
    entry_count: int
    size_bytes: int
    record_count: int
    first_offset: int
    next_offset: int
    attempts: tuple[bytes, ...] | None = None  # chosen attempts of the commit; None: all

    def copies(self, attempt: bytes) -> bool:
        """True if an entry tagged ``attempt`` is copied by this record's commit."""
        return self.attempts is None or not attempt or attempt in self.attempts

    @property
    def applied_range(self) -> tuple[int, int]:
        """(first, next) offset of the copy; for APPLIED records."""
        return self.first_offset, self.next_offset


class PartitionRow(NamedTuple):
    """A partition's row: its short id and how far its journal log is applied."""

    partition_id: int
    next_offset: int  # journal-log offset of the next record to apply
    purged_below: int  # transaction ids below it are complete here


def encode_partition_value(row: PartitionRow) -> bytes:
    return PARTITION_VALUE.pack(*row)


def decode_partition_value(value: bytes | memoryview, name: bytes) -> PartitionRow:
    if len(value) != PARTITION_VALUE.size:
        raise CorruptJournalError(
            f"journal partition row {name!r} is {len(value)} bytes, expected {PARTITION_VALUE.size}"
        )
    return PartitionRow(*PARTITION_VALUE.unpack(value))


def encode_entry_key(partition_id: int, sequence: int) -> bytes:
    return ENTRY_KEY.pack(partition_id, sequence)


def decode_entry_key(key: bytes | memoryview) -> tuple[int, int]:
    if len(key) != ENTRY_KEY.size:
        raise CorruptJournalError(
            f"journal entry key is {len(key)} bytes, expected {ENTRY_KEY.size}"
        )
    partition_id, sequence = ENTRY_KEY.unpack(key)
    return int(partition_id), int(sequence)


def encode_entry_value(
    header: EntryHeader, attempt: bytes, batch: bytes | memoryview | None
) -> bytearray:
    """The entry value: ``header``, ``attempt``, then ``batch`` (ENTRY_FORMAT_INLINE), or
    no batch (None: ENTRY_FORMAT_IN_LOG, the batch is read from the journal log).

    Mutable, because the journal's writer thread patches ``previous`` in place
    (only it reads the transaction's row in order); an inline batch is copied once,
    into the buffer LMDB copies again.
    """
    assert header.attempt_length == len(attempt)
    value = bytearray(
        ENTRY_HEADER.pack(
            ENTRY_FORMAT_IN_LOG if batch is None else ENTRY_FORMAT_INLINE,
            header.transaction_id,
            header.previous,
            header.producer_id,
            header.producer_generation,
            header.base_sequence,
            header.attempt_length,
        )
    )
    value += attempt
    if batch is not None:
        value += batch  # no zero-filled buffer of the batch's size first: one copy, no memset
    assert len(value) == header.batch_position + (0 if batch is None else len(batch))
    return value


# Where ``previous`` lies in an entry value: after format u8 and transaction_id i64.
_PREVIOUS_POSITION = struct.calcsize(">Bq")
_PREVIOUS = struct.Struct(">Q")
assert (
    ENTRY_HEADER.unpack_from(bytes(range(ENTRY_HEADER.size)))[2]
    == _PREVIOUS.unpack_from(bytes(range(ENTRY_HEADER.size)), _PREVIOUS_POSITION)[0]
)


def set_entry_previous(value: bytearray, previous: int) -> None:
    """Patch ``previous`` in an entry value from ``encode_entry_value`` (the writer's link)."""
    _PREVIOUS.pack_into(value, _PREVIOUS_POSITION, previous)


def decode_entry_header(value: bytes | bytearray | memoryview, where: str) -> EntryHeader:
    """Parse the fixed part of an entry value; ``where`` names the entry in errors."""
    if len(value) < ENTRY_HEADER.size:
        raise CorruptJournalError(
            f"journal entry {where} is {len(value)} bytes, shorter than its {ENTRY_HEADER.size}-byte header"
        )
    entry_format, *fields = ENTRY_HEADER.unpack_from(value)
    if entry_format not in ENTRY_FORMATS:
        raise CorruptJournalError(
            f"journal entry {where} has format {entry_format}, expected one of {ENTRY_FORMATS}"
        )
    header = EntryHeader._make((*fields, entry_format == ENTRY_FORMAT_IN_LOG))
    if header.batch_in_log and len(value) != header.batch_position:
        raise CorruptJournalError(
            f"journal entry {where} names its batch in the journal log but is "
            f"{len(value)} bytes, not the {header.batch_position} of its header and tag"
        )
    if len(value) < header.batch_position:
        raise CorruptJournalError(
            f"journal entry {where} says its attempt tag is {header.attempt_length} bytes, "
            f"only {len(value) - ENTRY_HEADER.size} follow the header"
        )
    return header


def decode_entry_attempt(value: bytes | bytearray | memoryview, header: EntryHeader) -> bytes:
    """The attempt tag of the entry ``value`` whose fixed part ``header`` was decoded from."""
    return bytes(value[ENTRY_HEADER.size : header.batch_position])


def encode_transaction_key(partition_id: int, transaction_id: int) -> bytes:
    return TRANSACTION_KEY.pack(partition_id, transaction_id)


def decode_transaction_key(key: bytes | memoryview) -> tuple[int, int]:
    if len(key) != TRANSACTION_KEY.size:
        raise CorruptJournalError(
            f"journal transaction key is {len(key)} bytes, expected {TRANSACTION_KEY.size}"
        )
    partition_id, transaction_id = TRANSACTION_KEY.unpack(key)
    return int(partition_id), int(transaction_id)


def encode_transaction_value(record: CopyRecord) -> bytes:
    fixed = TRANSACTION_VALUE.pack(
        record.state,
        record.first_sequence,
        record.last_sequence,
        record.entry_count,
        record.size_bytes,
        record.record_count,
        record.first_offset,
        record.next_offset,
    )
    if record.attempts is None:
        return fixed
    parts = [fixed, ATTEMPT_COUNT.pack(len(record.attempts))]
    for attempt in record.attempts:
        parts += [ATTEMPT_LENGTH.pack(len(attempt)), attempt]
    return b"".join(parts)


def _decode_attempts(tail: bytes | memoryview, where: str) -> tuple[bytes, ...] | None:
    if not tail:
        return None
    data = bytes(tail)
    if len(data) < ATTEMPT_COUNT.size:
        raise CorruptJournalError(f"journal transaction row {where}: attempt list cut short")
    (count,) = ATTEMPT_COUNT.unpack_from(data)
    position = ATTEMPT_COUNT.size
    attempts = []
    for _ in range(count):
        if position + ATTEMPT_LENGTH.size > len(data):
            raise CorruptJournalError(f"journal transaction row {where}: attempt list cut short")
        (length,) = ATTEMPT_LENGTH.unpack_from(data, position)
        position += ATTEMPT_LENGTH.size
        if position + length > len(data):
            raise CorruptJournalError(f"journal transaction row {where}: attempt list cut short")
        attempts.append(data[position : position + length])
        position += length
    if position != len(data):
        raise CorruptJournalError(
            f"journal transaction row {where}: {len(data) - position} bytes after the attempt list"
        )
    return tuple(attempts)


def decode_transaction_value(
    value: bytes | memoryview, partition: str, transaction_id: int
) -> CopyRecord:
    if len(value) < TRANSACTION_VALUE.size:
        raise CorruptJournalError(
            f"journal transaction row ({partition}, {transaction_id}) is {len(value)} bytes, "
            f"expected at least {TRANSACTION_VALUE.size}"
        )
    state, *fields = TRANSACTION_VALUE.unpack_from(value)
    attempts = _decode_attempts(value[TRANSACTION_VALUE.size :], f"({partition}, {transaction_id})")
    try:
        known_state = CopyState(state)
    except ValueError:
        raise CorruptJournalError(
            f"journal transaction row ({partition}, {transaction_id}) has state {state}, "
            f"expected one of {[int(s) for s in CopyState]}"
        ) from None
    return CopyRecord._make([partition, transaction_id, known_state, *fields, attempts])


def new_copy_record(partition: str, transaction_id: int) -> CopyRecord:
    """The record of a transaction with no entries yet."""
    return CopyRecord(
        partition=partition,
        transaction_id=transaction_id,
        state=CopyState.OPEN,
        first_sequence=NO_PREVIOUS,
        last_sequence=NO_PREVIOUS,
        entry_count=0,
        size_bytes=0,
        record_count=0,
        first_offset=NO_OFFSET,
        next_offset=NO_OFFSET,
    )
