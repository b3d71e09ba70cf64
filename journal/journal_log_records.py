"""Records of a partition's journal log (the replicable form of the local data journal).

Every change to the local data journal's LMDB tables is first one of these records,
appended to the partition's journal log (a ``DataLog`` in ``<partition dir>/journal``),
then applied to LMDB in offset order (``twinlog.journal.journal_logs``). A record's
offset in that log is its *journal offset*; an ENTRY's journal offset is its entry
sequence in LMDB, so the reverse links are the same on every copy of the log.

Each record is one batch (built with the batch builder's defaults) holding one record
whose key is empty and whose value is:

    JournalLogRecord := type int8, field*                    (fields per type, below)

    type  name           fields
    1     ENTRY          transaction_id i64, producer_id i64, producer_generation i32,
                         base_sequence i32, attempt bytes16, batch (the producer's batch,
                         unchanged, to the end of the value)
    2     MARK_APPLYING  transaction_id i64, start_offset i64, attempts
    3     MARK_APPLIED   transaction_id i64, first_offset i64, next_offset i64
    4     MARK_ABORTED   transaction_id i64
    5     PURGE          low_watermark i64 (transaction id; every id below it is complete)

    bytes16   := length uint16, bytes
    attempts  := count int32 (-1: every attempt), bytes16{count}

All integers are big-endian. The batch CRC protects the bytes; a value that still does
not decode (a bug, not line noise) raises CorruptJournalError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.records.batch_builder import RecordBatchBuilder


class JournalLogRecordType(IntEnum):
    ENTRY = 1
    MARK_APPLYING = 2
    MARK_APPLIED = 3
    MARK_ABORTED = 4
    PURGE = 5


@dataclass(frozen=True)
class Entry:
    """A transactional batch of an OPEN transaction, as the producer sent it."""

    transaction_id: int
    producer_id: int
    producer_generation: int
    base_sequence: int
    attempt: bytes
    batch: bytes | memoryview


@dataclass(frozen=True)
class MarkApplying:
    """The copier is about to copy the transaction into the data log from ``start_offset``."""

    transaction_id: int
    start_offset: int
    attempts: tuple[bytes, ...] | None  # None: every attempt


@dataclass(frozen=True)
class MarkApplied:
    """The copy lies whole and durable in the data log at [first_offset, next_offset)."""

    transaction_id: int
    first_offset: int
    next_offset: int


@dataclass(frozen=True)
class MarkAborted:
    transaction_id: int


@dataclass(frozen=True)
class Purge:
    low_watermark: int


JournalLogRecord = Entry | MarkApplying | MarkApplied | MarkAborted | Purge

_TYPE = struct.Struct(">b")
_ENTRY = struct.Struct(">qqiiH")  # transaction, producer, generation, base sequence, attempt len
_APPLYING = struct.Struct(">qqi")  # transaction, start offset, attempt count
_APPLIED = struct.Struct(">qqq")
_ID = struct.Struct(">q")
_LENGTH = struct.Struct(">H")
ALL_ATTEMPTS = -1
# What an ENTRY adds to the producer's batch: type, fixed fields, the attempt tag
# (up to 64 KiB), and the journal log batch's own header and record framing.
ENTRY_OVERHEAD_BYTES_MAX = _TYPE.size + _ENTRY.size + (1 << 16) + 256


def encode(record: JournalLogRecord) -> bytes:
    if isinstance(record, Entry):
        return b"".join(
            (
                _TYPE.pack(JournalLogRecordType.ENTRY),
                _ENTRY.pack(
                    record.transaction_id,
                    record.producer_id,
                    record.producer_generation,
                    record.base_sequence,
                    len(record.attempt),
                ),
                record.attempt,
                record.batch,
            )
        )
    if isinstance(record, MarkApplying):
        attempts = record.attempts
        parts = [
            _TYPE.pack(JournalLogRecordType.MARK_APPLYING),
            _APPLYING.pack(
                record.transaction_id,
                record.start_offset,
                ALL_ATTEMPTS if attempts is None else len(attempts),
            ),
        ]
        for attempt in attempts or ():
            parts += [_LENGTH.pack(len(attempt)), attempt]
        return b"".join(parts)
    if isinstance(record, MarkApplied):
        return _TYPE.pack(JournalLogRecordType.MARK_APPLIED) + _APPLIED.pack(
            record.transaction_id, record.first_offset, record.next_offset
        )
    if isinstance(record, MarkAborted):
        return _TYPE.pack(JournalLogRecordType.MARK_ABORTED) + _ID.pack(record.transaction_id)
    return _TYPE.pack(JournalLogRecordType.PURGE) + _ID.pack(record.low_watermark)


def build_batch(record: JournalLogRecord, timestamp_ms: int) -> bytes:
    """One journal-log batch holding ``record`` (the builder's defaults: no compression)."""
    builder = RecordBatchBuilder("none")
    builder.append(encode(record), timestamp_ms=timestamp_ms)
    return builder.build()


def decode(value: bytes, where: str) -> JournalLogRecord:
    """The record of a journal-log record value; ``where`` names it in errors."""
    try:
        (kind,) = _TYPE.unpack_from(value)
        position = _TYPE.size
        if kind == JournalLogRecordType.ENTRY:
            transaction_id, producer_id, generation, base_sequence, attempt_bytes = (
                _ENTRY.unpack_from(value, position)
            )
            position += _ENTRY.size
            attempt = value[position : position + attempt_bytes]
            if len(attempt) != attempt_bytes:
                raise struct.error("attempt tag cut short")
            position += attempt_bytes
            return Entry(
                transaction_id, producer_id, generation, base_sequence, attempt, value[position:]
            )
        if kind == JournalLogRecordType.MARK_APPLYING:
            transaction_id, start_offset, count = _APPLYING.unpack_from(value, position)
            position += _APPLYING.size
            attempts: list[bytes] | None = None if count == ALL_ATTEMPTS else []
            for _ in range(max(count, 0)):
                (length,) = _LENGTH.unpack_from(value, position)
                position += _LENGTH.size
                attempt = value[position : position + length]
                if len(attempt) != length:
                    raise struct.error("attempt cut short")
                position += length
                assert attempts is not None
                attempts.append(attempt)
            _check_end(value, position)
            return MarkApplying(
                transaction_id, start_offset, None if attempts is None else tuple(attempts)
            )
        if kind == JournalLogRecordType.MARK_APPLIED:
            _check_end(value, position + _APPLIED.size)
            return MarkApplied(*_APPLIED.unpack_from(value, position))
        if kind == JournalLogRecordType.MARK_ABORTED:
            _check_end(value, position + _ID.size)
            return MarkAborted(*_ID.unpack_from(value, position))
        if kind == JournalLogRecordType.PURGE:
            _check_end(value, position + _ID.size)
            return Purge(*_ID.unpack_from(value, position))
    except struct.error as error:
        raise CorruptJournalError(f"journal log record {where} does not decode: {error}") from None
    raise CorruptJournalError(
        f"journal log record {where} has type {kind}, expected one of "
        f"{[int(t) for t in JournalLogRecordType]}"
    )


def _check_end(value: bytes, position: int) -> None:
    if position != len(value):
        raise struct.error(f"{len(value) - position} bytes after the record's fields")
