"""Consumer group offsets: records of the internal topic ``__consumer_offsets``.

Offsets are plain log records, keyed by (group, topic, partition), in the
partition of ``__consumer_offsets`` that the group hashes to; the latest record
of a key wins, so the topic is compacted by key (``OFFSETS_TOPIC_CONFIG``:
cleanup.policy compact, engine/log/compaction.py) and folding it into memory at
start-up costs its live keys, not every commit ever made. Folding a compacted
log gives the same answers: compaction keeps the latest record of each key,
in offset order, and drops a deletion (null value) only with every older
record of its key. A plain commit appends directly; an offset commit inside a
transaction is journaled like any other transactional write and reaches the
topic only when the transaction is applied.

    OffsetKey   := version int16 (1), group str, topic str, partition int32
    OffsetValue := version int16 (1), offset int64, commit_timestamp_ms int64
                 | version int16 (2), offset int64, leader_epoch int32, metadata str,
                   commit_timestamp_ms int64
                   (a null value deletes the key: a deleted group, an OffsetDelete)
    EpochKey    := version int16 (2), group str
    EpochValue  := version int16 (1), group_epoch int32, timestamp_ms int64
                   (the group's last epoch, written before members see it; null: deleted)
    MemberKey   := version int16 (3), group str, member_id str
    MemberValue := version int16 (1), the member as its coordinator keeps it: identity,
                   subscription, timeouts, epochs, assigned and revoking partitions (each
                   with its assignment epoch), its target (``group_member_records``)
                   (null: the member left, was fenced or expired)
    str         := length int16, UTF-8 bytes

A group's step (``engine/groups``) writes its new epoch and its changed members as one
batch (``build_group_change_batch``), before any member is told of it. Members are not
part of the view: a load hands them to the coordinator's membership (``restore_with``),
which keeps them from then on. Directories written before member records existed load
with no members to restore.

An offset is written as version 1 when it has no metadata and no leader epoch (what
every commit was before version 2, which a broker of an earlier release still reads),
else as version 2 (Kafka's OffsetCommitValue v3 keeps the same three); both are read.
``encode_offset_value`` and ``decode_offset_value`` are the one encoder and decoder.

``GroupOffsets`` is the in-memory view the broker answers OffsetFetch from. It
also tracks, per (group, topic-partition), the transaction that holds a pending
offset commit, so a fetch answers PendingTransactionError instead of a stale
offset (KIP-447). What a newcomer may do about such a holder (KIP-447's group
fencing rule) is ``group_offset_fencing``'s policy.

In a cluster the view holds only the groups of the partitions this broker leads (it is
their group coordinator): ``replace_partition`` folds a partition in when its leadership
is loaded, ``drop_partition`` forgets it when another broker takes over.

Thread rule: every method takes the object's lock; any thread may call.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import (
    CorruptJournalError,
    OffsetMetadataTooLargeError,
    PendingTransactionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_member_records import (
    MEMBER_KEY_VERSION,
    decode_member_key,
    decode_member_value,
    encode_member_key,
    encode_member_value,
)
from twinlog.engine.groups.durable_member import DurableMember, GroupChange, StoredGroup
from twinlog.engine.groups.group_calls import NO_LEADER_EPOCH, OffsetAndMetadata
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_reader import Record, iter_batches

OFFSETS_TOPIC = "__consumer_offsets"
NO_OFFSET = -1
_NONE_COMMITTED = OffsetAndMetadata(NO_OFFSET)
_VERSION = 1
_EPOCH_KEY_VERSION = 2
_SHORT = struct.Struct(">h")
_PARTITION = struct.Struct(">i")
_VALUE = struct.Struct(">hqq")  # an OffsetValue of version 1
_VALUE_V2_HEAD = struct.Struct(">hqi")  # version 2: version, offset, leader epoch
_TIMESTAMP = struct.Struct(">q")
_VALUE_V2 = 2
# The longest metadata string a value can hold (its length is an int16); the broker's
# offset_metadata_max_bytes (Kafka's offset.metadata.max.bytes) is at most this.
STORED_METADATA_BYTES_MAX = 0x7FFF
_EPOCH_VALUE = struct.Struct(">hiq")

# Configuration of the topic, as Kafka's for its own: compacted (the latest
# commit per key is all that matters) and never deleted by age or size. Its
# segment size is the broker's offsets_segment_bytes (Kafka's
# offsets.topic.segment.bytes, 100 MiB), so that compaction, which only touches
# sealed segments, gets to work long before a 1 GiB segment fills.
OFFSETS_TOPIC_CONFIG: dict[str, str] = {"cleanup.policy": "compact", "retention.ms": "-1"}


def offsets_topic_config(stored: Mapping[str, str], segment_bytes: int) -> dict[str, str]:
    """The topic's config: what the data directory stores, completed with
    ``OFFSETS_TOPIC_CONFIG`` and ``segment_bytes`` (directories made before
    compaction existed lack them)."""
    return {**OFFSETS_TOPIC_CONFIG, "segment.bytes": str(segment_bytes), **stored}


def offsets_partition_for(group_id: str, partition_count: int) -> TopicPartition:
    """The ``__consumer_offsets`` partition a group's offsets live in (a stable hash)."""
    return TopicPartition(OFFSETS_TOPIC, crc32c(group_id.encode("utf-8")) % partition_count)


def _string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return _SHORT.pack(len(encoded)) + encoded


def encode_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    return (
        _SHORT.pack(_VERSION)
        + _string(group_id)
        + _string(topic_partition.topic)
        + _PARTITION.pack(topic_partition.partition)
    )


def encode_epoch_key(group_id: str) -> bytes:
    return _SHORT.pack(_EPOCH_KEY_VERSION) + _string(group_id)


def key_version(key: bytes) -> int:
    """The version of a key, which says its kind (1 offset, 2 epoch, 3 member)."""
    if len(key) < _SHORT.size:
        raise CorruptJournalError(f"{OFFSETS_TOPIC} holds a key of {len(key)} byte(s)")
    version: int = _SHORT.unpack_from(key, 0)[0]
    return version


def decode_key(key: bytes) -> tuple[str, TopicPartition | None]:
    """(group, topic-partition) of an OffsetKey; (group, None) of an EpochKey."""
    try:
        (version,) = _SHORT.unpack_from(key, 0)
        if version not in (_VERSION, _EPOCH_KEY_VERSION):
            raise CorruptJournalError(
                f"{OFFSETS_TOPIC} key version {version}, expected {_VERSION} or "
                f"{_EPOCH_KEY_VERSION}"
            )
        position = _SHORT.size
        texts = []
        for _ in range(2 if version == _VERSION else 1):
            (length,) = _SHORT.unpack_from(key, position)
            position += _SHORT.size
            if position + length > len(key):
                raise struct.error("a string runs past the end of the key")
            texts.append(key[position : position + length].decode("utf-8"))
            position += length
        if version == _EPOCH_KEY_VERSION:
            return texts[0], None
        (partition_index,) = _PARTITION.unpack_from(key, position)
    except (struct.error, UnicodeDecodeError) as error:
        raise CorruptJournalError(f"{OFFSETS_TOPIC} holds a malformed key: {error}") from None
    return texts[0], TopicPartition(texts[1], partition_index)


def build_epoch_batch(group_id: str, group_epoch: int | None) -> bytes:
    """One record of the group's epoch (None: a deletion of it)."""
    builder = RecordBatchBuilder("none")
    now_ms = time.time_ns() // 1_000_000
    value = None if group_epoch is None else _EPOCH_VALUE.pack(1, group_epoch, now_ms)
    builder.append(value, key=encode_epoch_key(group_id), timestamp_ms=now_ms)
    return builder.build()


def build_group_change_batch(change: GroupChange) -> bytes:
    """One batch of a group's step: its new epoch (when it changed) first, then the
    members it changed and the deletions of those it removed."""
    builder = RecordBatchBuilder("none")
    now_ms = time.time_ns() // 1_000_000
    if change.group_epoch is not None:
        builder.append(
            _EPOCH_VALUE.pack(1, change.group_epoch, now_ms),
            key=encode_epoch_key(change.group_id),
            timestamp_ms=now_ms,
        )
    for member in change.members:
        builder.append(
            encode_member_value(member),
            key=encode_member_key(change.group_id, member.member_id),
            timestamp_ms=now_ms,
        )
    for member_id in change.removed:
        key = encode_member_key(change.group_id, member_id)
        builder.append(None, key=key, timestamp_ms=now_ms)
    return builder.build()


def build_deletion_batch(group_id: str, partitions: Iterable[TopicPartition]) -> bytes:
    """Deletions of the group's offsets of ``partitions`` and of its epoch (a group
    deleted: compaction then drops them all)."""
    builder = RecordBatchBuilder("none")
    now_ms = time.time_ns() // 1_000_000
    for topic_partition in sorted(TopicPartition(*p) for p in partitions):
        builder.append(None, key=encode_key(group_id, topic_partition), timestamp_ms=now_ms)
    builder.append(None, key=encode_epoch_key(group_id), timestamp_ms=now_ms)
    return builder.build()


def build_offset_deletions_batch(group_id: str, partitions: Iterable[TopicPartition]) -> bytes:
    """Deletions of the group's offsets of ``partitions`` (an OffsetDelete: the group and
    its other offsets stay)."""
    builder = RecordBatchBuilder("none")
    now_ms = time.time_ns() // 1_000_000
    for topic_partition in sorted(TopicPartition(*p) for p in partitions):
        builder.append(None, key=encode_key(group_id, topic_partition), timestamp_ms=now_ms)
    return builder.build()


def as_committed(offset: int | OffsetAndMetadata) -> OffsetAndMetadata:
    """An offset to commit as an ``OffsetAndMetadata`` (a bare offset: no metadata, no
    leader epoch)."""
    if isinstance(offset, OffsetAndMetadata):
        return offset
    return OffsetAndMetadata(int(offset))


def encode_offset_value(committed: OffsetAndMetadata, commit_timestamp_ms: int) -> bytes:
    """An OffsetValue: version 1 when it has no metadata and no leader epoch, else 2."""
    if not committed.metadata and committed.leader_epoch == NO_LEADER_EPOCH:
        return _VALUE.pack(_VERSION, committed.offset, commit_timestamp_ms)
    metadata = committed.metadata.encode("utf-8")
    if len(metadata) > STORED_METADATA_BYTES_MAX:
        raise OffsetMetadataTooLargeError(
            f"an offset's metadata is {len(metadata)} bytes; at most "
            f"{STORED_METADATA_BYTES_MAX} can be stored: commit a shorter one"
        )
    return (
        _VALUE_V2_HEAD.pack(_VALUE_V2, committed.offset, committed.leader_epoch)
        + _SHORT.pack(len(metadata))
        + metadata
        + _TIMESTAMP.pack(commit_timestamp_ms)
    )


def decode_offset_value(value: bytes) -> OffsetAndMetadata:
    """An OffsetValue of version 1 or 2; CorruptJournalError for anything else (an unknown
    version, a value cut short or running on, metadata that is not UTF-8)."""
    try:
        (version,) = _SHORT.unpack_from(value, 0)
        if version == _VERSION:
            if len(value) != _VALUE.size:
                raise struct.error(f"{len(value)} bytes, expected {_VALUE.size}")
            return OffsetAndMetadata(_VALUE.unpack(value)[1])
        if version != _VALUE_V2:
            raise CorruptJournalError(
                f"{OFFSETS_TOPIC} offset value version {version}, expected {_VERSION} or "
                f"{_VALUE_V2} (written by a newer twinlog? run the release that wrote it)"
            )
        _, offset, leader_epoch = _VALUE_V2_HEAD.unpack_from(value, 0)
        position = _VALUE_V2_HEAD.size
        (length,) = _SHORT.unpack_from(value, position)
        position += _SHORT.size
        if length < 0 or position + length + _TIMESTAMP.size != len(value):
            raise struct.error(f"metadata of {length} bytes does not fit a {len(value)}-byte value")
        metadata = value[position : position + length].decode("utf-8")
    except (struct.error, UnicodeDecodeError) as error:
        raise CorruptJournalError(
            f"{OFFSETS_TOPIC} holds a malformed offset value: {error}"
        ) from None
    return OffsetAndMetadata(offset, metadata, leader_epoch)


def build_offsets_batch(
    group_id: str,
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
    transactional: bool = False,
) -> bytes:
    """One batch of offset records (built by the broker: these are its own records).

    ``transactional`` sets the batch's transactional bit; the transaction it belongs to
    is passed beside it to the local data journal, as for any transactional batch.
    """
    builder = RecordBatchBuilder("none", transactional=transactional)
    now_ms = time.time_ns() // 1_000_000
    for topic_partition, offset in sorted(offsets.items()):
        builder.append(
            encode_offset_value(as_committed(offset), now_ms),
            key=encode_key(group_id, TopicPartition(*topic_partition)),
            timestamp_ms=now_ms,
        )
    return builder.build()


class GroupOffsets:
    def __init__(self, partition_count: int) -> None:
        self.partition_count = partition_count
        self._lock = threading.Lock()
        self._committed: dict[tuple[str, TopicPartition], OffsetAndMetadata] = {}
        self._pending: dict[tuple[str, TopicPartition], int] = {}  # -> transaction id
        self._epochs: dict[str, int] = {}  # group -> its last durable group epoch
        # Who takes the members of the groups a load found (the coordinator's membership).
        self._restore: Callable[[list[StoredGroup]], None] | None = None

    def partition_for(self, group_id: str) -> TopicPartition:
        return offsets_partition_for(group_id, self.partition_count)

    def restore_with(self, restore: Callable[[list[StoredGroup]], None]) -> None:
        """``restore`` takes the members of the groups each load finds (once, at start-up)."""
        self._restore = restore

    def observe(self, records: Iterable[Record]) -> None:
        """Fold records read from (or appended to) ``__consumer_offsets`` into the view
        (member records are the membership's, which wrote them: skipped)."""
        with self._lock:
            _fold(self._committed, self._epochs, records, None)

    def replace_partition(
        self,
        partition_index: int,
        records: Iterable[Record],
        pending: Iterable[tuple[str, TopicPartition, int]],
    ) -> int:
        """The view of the groups of partition ``partition_index`` becomes ``records``
        folded, with ``pending`` (group, topic-partition, transaction id) marks: what the
        partition's new leader read from its log and journal; the groups' members go to
        ``restore_with``'s taker. Returns the keys held."""
        committed: dict[tuple[str, TopicPartition], OffsetAndMetadata] = {}
        epochs: dict[str, int] = {}
        members: dict[str, dict[str, DurableMember]] = {}  # group -> member id -> member
        _fold(committed, epochs, records, members)  # outside the lock: the fold reads the log
        with self._lock:
            self._drop(partition_index)
            self._committed.update(committed)
            self._epochs.update(epochs)
            for group_id, topic_partition, transaction_id in pending:
                self._pending[(group_id, topic_partition)] = transaction_id
        stored = [
            StoredGroup(group_id, epochs.get(group_id, 0), tuple(found[m] for m in sorted(found)))
            for group_id, found in sorted(members.items())
            if found
        ]
        if stored and self._restore is not None:
            self._restore(stored)
        return len(committed)

    def drop_partition(self, partition_index: int) -> None:
        """Forget the groups of partition ``partition_index`` (another broker leads it)."""
        with self._lock:
            self._drop(partition_index)

    def _drop(self, partition_index: int) -> None:
        def elsewhere(key: tuple[str, TopicPartition | None]) -> bool:
            return self.partition_for(key[0]).partition != partition_index

        self._committed = {k: v for k, v in self._committed.items() if elsewhere(k)}
        self._pending = {k: v for k, v in self._pending.items() if elsewhere(k)}
        self._epochs = {g: e for g, e in self._epochs.items() if elsewhere((g, None))}

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Committed offsets (NO_OFFSET where none); PendingTransactionError if any is pending."""
        return {p: c.offset for p, c in self.fetch_committed(group_id, partitions).items()}

    def fetch_committed(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``fetch`` with each offset's metadata and leader epoch (NO_OFFSET, "" and
        NO_LEADER_EPOCH where none)."""
        with self._lock:
            wanted = [TopicPartition(*p) for p in partitions]
            for topic_partition in wanted:
                holder = self._pending.get((group_id, topic_partition))
                if holder is not None:
                    raise PendingTransactionError(
                        f"group {group_id!r} has an offset for {topic_partition} in transaction {holder}, "
                        "which is not complete yet; retry shortly (the answer would be stale)"
                    )
            return {p: self._committed.get((group_id, p), _NONE_COMMITTED) for p in wanted}

    def holders(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Transactions (other than none) holding pending commits of these partitions."""
        with self._lock:
            found = {}
            for p in partitions:
                holder = self._pending.get((group_id, TopicPartition(*p)))
                if holder is not None:
                    found[TopicPartition(*p)] = holder
            return found

    def mark_pending(
        self, group_id: str, partitions: Iterable[TopicPartition], transaction_id: int
    ) -> None:
        with self._lock:
            for topic_partition in partitions:
                self._pending[(group_id, TopicPartition(*topic_partition))] = transaction_id

    def clear_pending(
        self, transaction_id: int, groups: Mapping[str, Iterable[TopicPartition]]
    ) -> None:
        """Drop the transaction's pending marks (after it is applied or aborted)."""
        with self._lock:
            for group_id, partitions in groups.items():
                for topic_partition in partitions:
                    key = (group_id, TopicPartition(*topic_partition))
                    if self._pending.get(key) == transaction_id:
                        del self._pending[key]

    def clear_pending_of(self, transaction_id: int, partition_index: int) -> None:
        """Drop the transaction's pending marks of the groups of partition
        ``partition_index`` (the transaction's APPLY reached that partition)."""
        with self._lock:
            self._pending = {
                key: holder
                for key, holder in self._pending.items()
                if holder != transaction_id
                or self.partition_for(key[0]).partition != partition_index
            }

    def committed(self) -> dict[tuple[str, TopicPartition], int]:
        """A copy of every committed offset, by (group, topic-partition): for lag figures."""
        with self._lock:
            return {key: committed.offset for key, committed in self._committed.items()}

    def group_epoch(self, group_id: str) -> int:
        """The group's last durable epoch (0 if it never had one)."""
        with self._lock:
            return self._epochs.get(group_id, 0)

    def group_ids(self) -> set[str]:
        """Every group with a committed offset or a durable epoch."""
        with self._lock:
            return {group for group, _ in self._committed} | set(self._epochs)

    def offsets_of(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (pending ones not included)."""
        with self._lock:
            return {p: c.offset for (g, p), c in self._committed.items() if g == group_id}

    def committed_of(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """``offsets_of`` with each offset's metadata and leader epoch."""
        with self._lock:
            return {p: c for (g, p), c in self._committed.items() if g == group_id}

    def pending_count(self) -> int:
        with self._lock:
            return len(self._pending)


def _fold(
    committed: dict[tuple[str, TopicPartition], OffsetAndMetadata],
    epochs: dict[str, int],
    records: Iterable[Record],
    members: dict[str, dict[str, DurableMember]] | None,
) -> None:
    """Fold ``records`` in, the latest record of a key winning; member records into
    ``members`` (skipped when None)."""
    for record in records:
        if record.key is None:
            continue
        if key_version(record.key) == MEMBER_KEY_VERSION:
            if members is not None:
                _fold_member(members, record.key, record.value)
            continue
        group_id, topic_partition = decode_key(record.key)
        if topic_partition is None:
            if record.value is None:
                epochs.pop(group_id, None)
            else:
                epochs[group_id] = _EPOCH_VALUE.unpack(record.value)[1]
        elif record.value is None:
            committed.pop((group_id, topic_partition), None)
        else:
            committed[(group_id, topic_partition)] = decode_offset_value(record.value)


def _fold_member(
    members: dict[str, dict[str, DurableMember]], key: bytes, value: bytes | None
) -> None:
    group_id, member_id = decode_member_key(key)
    of_group = members.setdefault(group_id, {})
    if value is None:
        of_group.pop(member_id, None)
    else:
        of_group[member_id] = decode_member_value(member_id, value)


def pending_offsets(
    batches: Iterable[bytes], transaction_id: int
) -> set[tuple[str, TopicPartition, int]]:
    """The (group, topic-partition, transaction) marks a transaction's journaled offsets
    batches make: what a new group coordinator restores from its partition's journal."""
    found = set()
    for batch in batches:
        for one in iter_batches(batch):
            for record in one.records():
                if record.key is not None and key_version(record.key) != MEMBER_KEY_VERSION:
                    group_id, topic_partition = decode_key(record.key)
                    if topic_partition is not None:
                        found.add((group_id, topic_partition, transaction_id))
    return found
