"""Records of a partition's journal log (the replicable form of the local data journal).

Every change to the local data journal's LMDB tables is first one of these records,
appended to the partition's journal log (a ``DataLog`` in ``<partition dir>/journal``),
then applied to LMDB in offset order (``twinlog.journal.journal_log``). A record's
offset in that log is its *journal offset*; an ENTRY's journal offset is its entry
sequence in LMDB, so the reverse links are the same on every copy of the log.

Each record is one batch (the bytes the batch builder's defaults give; ``build_batch_pieces``
writes them without copying an ENTRY's batch) holding one record whose key is null and
whose value is:

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

``make_entry`` and ``make_mark_applying`` build the records of a caller's arguments,
checked before they reach a journal log (``journal_logs.JournalLogs`` writes them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from twinlog.engine.base.errors import CorruptJournalError, InvalidTxnStateError
from twinlog.engine.records.batch_format import (
    NO_PRODUCER_GENERATION,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    encode_header,
    read_header,
)
from twinlog.engine.records.compression import CODEC_NONE
from twinlog.engine.records.varint import encode_varint
from twinlog.journal.local_format import ATTEMPT_BYTES_MAX


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


def make_entry(
    transaction_id: int,
    batch: bytes | memoryview,
    *,
    producer_id: int | None = None,
    producer_generation: int | None = None,
    base_sequence: int | None = None,
    attempt: bytes = b"",
) -> Entry:
    """The ENTRY record of ``batch``, checked (before it reaches a journal log, so that a
    replay never meets a record it cannot apply); ids default to the batch header's."""
    if transaction_id < 0:
        raise InvalidTxnStateError(f"transaction id {transaction_id} is negative; expected >= 0")
    if len(attempt) > ATTEMPT_BYTES_MAX:
        raise InvalidTxnStateError(
            f"attempt tag is {len(attempt)} bytes, at most {ATTEMPT_BYTES_MAX}"
        )
    header = read_header(batch)
    if not header.is_transactional:  # the transaction id is the caller's, not the batch's
        raise InvalidTxnStateError(
            f"the batch for transaction {transaction_id} is not transactional (attributes "
            "bit 4); not journaled"
        )
    return Entry(
        transaction_id=transaction_id,
        producer_id=header.producer_id if producer_id is None else producer_id,
        producer_generation=(
            header.producer_generation if producer_generation is None else producer_generation
        ),
        base_sequence=header.base_sequence if base_sequence is None else base_sequence,
        attempt=attempt,
        batch=batch,
    )


def make_mark_applying(
    transaction_id: int, start_offset: int, attempts: Iterable[bytes] | None
) -> MarkApplying:
    """The MARK_APPLYING record of a copy choosing ``attempts`` (None: every attempt), in
    one order whatever order they came in."""
    chosen = None if attempts is None else tuple(sorted(set(attempts)))
    return MarkApplying(transaction_id, start_offset, chosen)


def encode(record: JournalLogRecord) -> bytes:
    """The value of ``record``'s journal-log record."""
    return b"".join(encode_pieces(record))


def encode_pieces(record: JournalLogRecord) -> list[bytes | memoryview]:
    """``encode(record)`` as pieces: an ENTRY's batch is its own piece, not copied."""
    if isinstance(record, Entry):
        return [
            b"".join(
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
                )
            ),
            record.batch,
        ]
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
        return [b"".join(parts)]
    if isinstance(record, MarkApplied):
        return [
            _TYPE.pack(JournalLogRecordType.MARK_APPLIED)
            + _APPLIED.pack(record.transaction_id, record.first_offset, record.next_offset)
        ]
    if isinstance(record, MarkAborted):
        return [_TYPE.pack(JournalLogRecordType.MARK_ABORTED) + _ID.pack(record.transaction_id)]
    return [_TYPE.pack(JournalLogRecordType.PURGE) + _ID.pack(record.low_watermark)]


_ZERO = encode_varint(0)  # attributes, timestamp and offset deltas, header count
_NULL = encode_varint(-1)  # the record's key


def build_batch_pieces(record: JournalLogRecord, timestamp_ms: int) -> list[bytes | memoryview]:
    """One journal-log batch holding ``record``, as pieces for one ``pwritev``: an ENTRY's
    batch, most of what a journal writes, is one of them, never copied (joining it into
    the record's value and then into the batch cost two copies of every journaled byte).

    Joined, the pieces are the batch ``RecordBatchBuilder("none")`` builds of
    ``encode(record)`` at ``timestamp_ms`` (the tests pin it): one record, timestamp and
    offset delta 0, a null key, no headers; no producer, not transactional.
    """
    value = encode_pieces(record)
    value_bytes = sum(len(piece) for piece in value)
    value_length = encode_varint(value_bytes)
    # attributes, timestamp delta, offset delta, key length: 1 byte each; the header count: 1
    body_bytes = 4 + len(value_length) + value_bytes + 1
    head = b"".join((encode_varint(body_bytes), _ZERO, _ZERO, _ZERO, _NULL, value_length, value[0]))
    records: list[bytes | memoryview] = [head, *value[1:], _ZERO]
    header = encode_header(
        records,
        base_offset=0,
        attributes=CODEC_NONE,
        last_offset_delta=0,
        first_timestamp_ms=timestamp_ms,
        max_timestamp_ms=timestamp_ms,
        producer_id=NO_PRODUCER_ID,
        producer_generation=NO_PRODUCER_GENERATION,
        base_sequence=NO_SEQUENCE,
        record_count=1,
    )
    return [bytes(header) + head, *records[1:]]


def build_batch(record: JournalLogRecord, timestamp_ms: int) -> bytes:
    """One journal-log batch holding ``record``, whole."""
    return b"".join(build_batch_pieces(record, timestamp_ms))


def decode(value: bytes | memoryview, where: str) -> JournalLogRecord:
    """The record of a journal-log record value; ``where`` names it in errors. An ENTRY's
    batch is a view of ``value``; its other fields are copied out."""
    try:
        (kind,) = _TYPE.unpack_from(value)
        position = _TYPE.size
        if kind == JournalLogRecordType.ENTRY:
            transaction_id, producer_id, generation, base_sequence, attempt_bytes = (
                _ENTRY.unpack_from(value, position)
            )
            position += _ENTRY.size
            attempt = bytes(value[position : position + attempt_bytes])
            if len(attempt) != attempt_bytes:
                raise struct.error("attempt tag cut short")
            position += attempt_bytes
            return Entry(  # the batch a view: it is most of the value, and read to be copied
                transaction_id,
                producer_id,
                generation,
                base_sequence,
                attempt,
                memoryview(value)[position:],
            )
        if kind == JournalLogRecordType.MARK_APPLYING:
            transaction_id, start_offset, count = _APPLYING.unpack_from(value, position)
            position += _APPLYING.size
            attempts: list[bytes] | None = None if count == ALL_ATTEMPTS else []
            for _ in range(max(count, 0)):
                (length,) = _LENGTH.unpack_from(value, position)
                position += _LENGTH.size
                attempt = bytes(value[position : position + length])
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


def _check_end(value: bytes | memoryview, position: int) -> None:
    if position != len(value):
        raise struct.error(f"{len(value) - position} bytes after the record's fields")
