"""Records of the transaction journal (the coordinator's log) and their encoding.

Names: a ``CoordinatorRecord`` is one decision in this log; not a ``CopyRecord`` (the local
data journal's row for a transaction on one partition) nor a data ``Record`` of a batch.

The transaction journal is a log like any data log: record batches in
segments (``twinlog.engine.log``). Each coordinator decision is one batch holding one
record whose key is empty and whose value is:

    CoordinatorRecord := type int8, timestamp_ms int64, field*      (fields per type, below)

    type  name            fields
    1     INIT_PRODUCER   transactional_id str, producer_id i64, producer_generation i32,
                          timeout_ms i32
    2     BEGIN           transaction_id i64, transactional_id str, producer_id i64,
                          producer_generation i32, timeout_ms i32, request_id i64
    3     ADD_PARTITIONS  transaction_id i64, partitions partitions, by_send i8
    4     ADD_OFFSETS     transaction_id i64, group_id str, partitions partitions
    5     PREPARE_COMMIT  transaction_id i64, attempts attempts, journaled counts
    6     PREPARE_ABORT   transaction_id i64
    7     COMMITTED       transaction_id i64
    8     ABORTED         transaction_id i64

    str        := length int16, UTF-8 bytes
    partitions := count int32, (topic str, partition int32){count}
    attempts   := count int32 (-1: all entries), str{count}
    counts     := count int32, (topic str, partition int32, entries int32){count}

``by_send`` is 1 when a produce added the partition (its batch is journaled
right after), 0 when AddPartitionsToTransaction did (it may receive nothing).
A commit checks that every partition added by a send holds journaled batches
and writes how many into PREPARE_COMMIT's ``journaled``; APPLY_COMMIT refuses
to apply a partition whose local journal lost them (LMDB keeps no checksums:
a damaged journal must stop the copy, not turn it into an empty one).

``attempts`` lets a writer with several task attempts (the Spark sink) commit
only the attempts whose results it kept: APPLY_COMMIT copies the entries
tagged with one of them (and untagged ones) and drops the rest. It is part of
the decision, so a redo after a crash applies exactly the same set.

ADD_OFFSETS names the group and the partitions whose offsets the transaction
commits (the offsets themselves travel as a transactional write to the
group's partition of ``__consumer_offsets``, like any other record).

All integers are big-endian. The batch CRC protects the bytes; a record that
still does not decode (a bug, not line noise) raises CorruptJournalError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, ClassVar

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.base.types import TopicPartition


class CoordinatorRecordType(IntEnum):
    INIT_PRODUCER = 1
    BEGIN = 2
    ADD_PARTITIONS = 3
    ADD_OFFSETS = 4
    PREPARE_COMMIT = 5
    PREPARE_ABORT = 6
    COMMITTED = 7
    ABORTED = 8


_PREFIX = struct.Struct(">bq")  # type, timestamp_ms
_SCALARS = {"i8": struct.Struct(">b"), "i32": struct.Struct(">i"), "i64": struct.Struct(">q")}
_STRING_LENGTH = struct.Struct(">h")
_COUNT = struct.Struct(">i")
_PARTITION = struct.Struct(">i")


@dataclass(frozen=True)
class CoordinatorRecord:
    """Base of the record types. ``FIELDS`` lists (name, kind) in wire order."""

    TYPE: ClassVar[CoordinatorRecordType]
    FIELDS: ClassVar[tuple[tuple[str, str], ...]]
    timestamp_ms: int


@dataclass(frozen=True)
class InitProducer(CoordinatorRecord):
    TYPE = CoordinatorRecordType.INIT_PRODUCER
    FIELDS = (
        ("transactional_id", "str"),
        ("producer_id", "i64"),
        ("producer_generation", "i32"),
        ("timeout_ms", "i32"),
    )
    transactional_id: str
    producer_id: int
    producer_generation: int
    timeout_ms: int


@dataclass(frozen=True)
class Begin(CoordinatorRecord):
    TYPE = CoordinatorRecordType.BEGIN
    FIELDS = (
        ("transaction_id", "i64"),
        ("transactional_id", "str"),
        ("producer_id", "i64"),
        ("producer_generation", "i32"),
        ("timeout_ms", "i32"),
        ("request_id", "i64"),
    )
    transaction_id: int
    transactional_id: str
    producer_id: int
    producer_generation: int
    timeout_ms: int
    request_id: int


@dataclass(frozen=True)
class AddPartitions(CoordinatorRecord):
    TYPE = CoordinatorRecordType.ADD_PARTITIONS
    FIELDS = (("transaction_id", "i64"), ("partitions", "partitions"), ("by_send", "i8"))
    transaction_id: int
    partitions: tuple[TopicPartition, ...] = field(default=())
    by_send: int = 0  # 1: added by a produce, so it must hold journaled batches at commit


@dataclass(frozen=True)
class AddOffsets(CoordinatorRecord):
    TYPE = CoordinatorRecordType.ADD_OFFSETS
    FIELDS = (("transaction_id", "i64"), ("group_id", "str"), ("partitions", "partitions"))
    transaction_id: int
    group_id: str
    partitions: tuple[TopicPartition, ...] = field(default=())


@dataclass(frozen=True)
class PrepareCommit(CoordinatorRecord):
    TYPE = CoordinatorRecordType.PREPARE_COMMIT
    FIELDS = (
        ("transaction_id", "i64"),
        ("attempts", "attempts"),
        ("journaled", "counts"),
    )
    transaction_id: int
    attempts: tuple[str, ...] | None = None  # None: every entry
    # (partition, journal entries it held at the decision), for partitions added by a send
    journaled: tuple[tuple[TopicPartition, int], ...] = field(default=())


@dataclass(frozen=True)
class PrepareAbort(CoordinatorRecord):
    TYPE = CoordinatorRecordType.PREPARE_ABORT
    FIELDS = (("transaction_id", "i64"),)
    transaction_id: int


@dataclass(frozen=True)
class Committed(CoordinatorRecord):
    TYPE = CoordinatorRecordType.COMMITTED
    FIELDS = (("transaction_id", "i64"),)
    transaction_id: int


@dataclass(frozen=True)
class Aborted(CoordinatorRecord):
    TYPE = CoordinatorRecordType.ABORTED
    FIELDS = (("transaction_id", "i64"),)
    transaction_id: int


RECORD_CLASSES: dict[CoordinatorRecordType, type[CoordinatorRecord]] = {
    cls.TYPE: cls
    for cls in (
        InitProducer,
        Begin,
        AddPartitions,
        AddOffsets,
        PrepareCommit,
        PrepareAbort,
        Committed,
        Aborted,
    )
}
for _cls in RECORD_CLASSES.values():  # the wire order must name every dataclass field
    assert [name for name, _ in _cls.FIELDS] == [f.name for f in fields(_cls)][1:], _cls


def _encode_string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    if len(encoded) > 0x7FFF:
        raise ValueError(f"string of {len(encoded)} bytes is longer than 32767 bytes")
    return _STRING_LENGTH.pack(len(encoded)) + encoded


def encode(record: CoordinatorRecord) -> bytes:
    parts = [_PREFIX.pack(record.TYPE, record.timestamp_ms)]
    for name, kind in record.FIELDS:
        value = getattr(record, name)
        if kind == "str":
            parts.append(_encode_string(value))
        elif kind == "partitions":
            parts.append(_COUNT.pack(len(value)))
            for topic, partition in value:
                parts.append(_encode_string(topic))
                parts.append(_PARTITION.pack(partition))
        elif kind == "attempts":
            parts.append(_COUNT.pack(-1 if value is None else len(value)))
            parts.extend(_encode_string(attempt) for attempt in value or ())
        elif kind == "counts":
            parts.append(_COUNT.pack(len(value)))
            for (topic, partition), count in value:
                parts.append(_encode_string(topic))
                parts.append(_PARTITION.pack(partition))
                parts.append(_COUNT.pack(count))
        else:
            parts.append(_SCALARS[kind].pack(value))
    return b"".join(parts)


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise CorruptJournalError(
                f"transaction journal record ends at byte {len(self.data)}, a field needs "
                f"bytes {self.position}..{end}"
            )
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def unpack(self, format_: struct.Struct) -> Any:
        return format_.unpack(self.take(format_.size))[0]

    def string(self) -> str:
        raw = self.take(self.unpack(_STRING_LENGTH))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptJournalError(
                "transaction journal record holds a string that is not UTF-8"
            ) from None


def decode(data: bytes) -> CoordinatorRecord:
    """Decode one record value; CorruptJournalError for anything malformed."""
    cursor = _Cursor(data)
    type_code, timestamp_ms = _PREFIX.unpack(cursor.take(_PREFIX.size))
    try:
        cls = RECORD_CLASSES[CoordinatorRecordType(type_code)]
    except ValueError:
        raise CorruptJournalError(
            f"transaction journal record type {type_code} is unknown (expected 1..8)"
        ) from None
    values: dict[str, Any] = {"timestamp_ms": timestamp_ms}
    for name, kind in cls.FIELDS:
        if kind == "str":
            values[name] = cursor.string()
        elif kind == "partitions":
            count = cursor.unpack(_COUNT)
            if count < 0:
                raise CorruptJournalError(f"transaction journal record lists {count} partitions")
            values[name] = tuple(
                TopicPartition(cursor.string(), cursor.unpack(_PARTITION)) for _ in range(count)
            )
        elif kind == "attempts":
            count = cursor.unpack(_COUNT)
            if count < -1:
                raise CorruptJournalError(f"transaction journal record lists {count} attempts")
            values[name] = None if count == -1 else tuple(cursor.string() for _ in range(count))
        elif kind == "counts":
            count = cursor.unpack(_COUNT)
            if count < 0:
                raise CorruptJournalError(f"transaction journal record lists {count} counts")
            values[name] = tuple(
                (TopicPartition(cursor.string(), cursor.unpack(_PARTITION)), cursor.unpack(_COUNT))
                for _ in range(count)
            )
        else:
            values[name] = cursor.unpack(_SCALARS[kind])
    if cursor.position != len(data):
        raise CorruptJournalError(
            f"transaction journal {cls.TYPE.name} record has {len(data) - cursor.position} "
            "bytes after its last field"
        )
    return cls(**values)
