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
    9     CHECKPOINT      replay_from_offset i64, part i32, parts i32, producers producers

    str        := length int16, UTF-8 bytes
    partitions := count int32, (topic str, partition int32){count}
    attempts   := count int32 (-1: all entries), str{count}
    counts     := count int32, (topic str, partition int32, entries int32){count}
    producers  := count int32, (transactional_id str, producer_id i64, producer_generation i32,
                  timeout_ms i32, last_transaction_id i64, last_outcome i8){count}
                  (last_outcome: 0 none, 1 COMMITTED, 2 ABORTED; last_transaction_id -1: none)

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

CHECKPOINT is part ``part`` (0-based) of ``parts`` consecutive records that
together hold the coordinator's producer table as of their own offset, and the
offset replay must start from (``twinlog.journal.txn_checkpoint``). A table is
split so that no part outgrows a small batch; the parts are appended in one go,
contiguously, and are used only once a pointer names the first of them.

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
    CHECKPOINT = 9


_PREFIX = struct.Struct(">bq")  # type, timestamp_ms
_SCALARS = {"i8": struct.Struct(">b"), "i32": struct.Struct(">i"), "i64": struct.Struct(">q")}
_STRING_LENGTH = struct.Struct(">h")
_COUNT = struct.Struct(">i")
_PARTITION = struct.Struct(">i")
_PRODUCER = struct.Struct(">qiiqb")  # after the transactional id: the fixed-size fields
LAST_OUTCOMES = ("", "COMMITTED", "ABORTED")  # by their code in a producers field


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


@dataclass(frozen=True)
class ProducerSnapshot:
    """One producer of a checkpoint's table.

    ``last_transaction_id`` / ``last_outcome`` ("COMMITTED" or "ABORTED"; -1 / "" for none)
    are its last completed transaction: a retried commit or abort whose records lie
    before the checkpoint still gets its answer after a restart.
    """

    transactional_id: str
    producer_id: int
    producer_generation: int
    timeout_ms: int
    last_transaction_id: int = -1
    last_outcome: str = ""


@dataclass(frozen=True)
class CheckpointPart(CoordinatorRecord):
    TYPE = CoordinatorRecordType.CHECKPOINT
    FIELDS = (
        ("replay_from_offset", "i64"),
        ("part", "i32"),
        ("parts", "i32"),
        ("producers", "producers"),
    )
    replay_from_offset: int  # the earliest in-flight BEGIN when it was taken (or the log end)
    part: int  # 0 .. parts - 1
    parts: int
    producers: tuple[ProducerSnapshot, ...] = field(default=())


def encoded_producer_bytes(producer: ProducerSnapshot) -> int:
    """Bytes ``producer`` takes in a producers field (to split a table into parts)."""
    return _STRING_LENGTH.size + len(producer.transactional_id.encode("utf-8")) + _PRODUCER.size


CHECKPOINT_PART_OVERHEAD_BYTES = _PREFIX.size + 8 + 4 + 4 + _COUNT.size


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
        CheckpointPart,
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
        elif kind == "producers":
            parts.append(_COUNT.pack(len(value)))
            for producer in value:
                parts.append(_encode_string(producer.transactional_id))
                parts.append(
                    _PRODUCER.pack(
                        producer.producer_id,
                        producer.producer_generation,
                        producer.timeout_ms,
                        producer.last_transaction_id,
                        LAST_OUTCOMES.index(producer.last_outcome),
                    )
                )
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
            f"transaction journal record type {type_code} is unknown (expected 1..{len(RECORD_CLASSES)})"
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
        elif kind == "producers":
            count = cursor.unpack(_COUNT)
            if count < 0:
                raise CorruptJournalError(f"transaction journal record lists {count} producers")
            values[name] = tuple(_decode_producer(cursor) for _ in range(count))
        else:
            values[name] = cursor.unpack(_SCALARS[kind])
    if cursor.position != len(data):
        raise CorruptJournalError(
            f"transaction journal {cls.TYPE.name} record has {len(data) - cursor.position} "
            "bytes after its last field"
        )
    return cls(**values)


def _decode_producer(cursor: _Cursor) -> ProducerSnapshot:
    transactional_id = cursor.string()
    producer_id, generation, timeout_ms, last_transaction_id, outcome_code = _PRODUCER.unpack(
        cursor.take(_PRODUCER.size)
    )
    if not 0 <= outcome_code < len(LAST_OUTCOMES):
        raise CorruptJournalError(
            f"transaction journal CHECKPOINT record: producer {transactional_id!r} has last "
            f"outcome code {outcome_code} (expected 0..{len(LAST_OUTCOMES) - 1})"
        )
    return ProducerSnapshot(
        transactional_id,
        producer_id,
        generation,
        timeout_ms,
        last_transaction_id,
        LAST_OUTCOMES[outcome_code],
    )
