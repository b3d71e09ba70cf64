"""The member records of ``__consumer_offsets``: each member of a group as its coordinator
made it durable (``engine/groups/durable_member``), so the next coordinator of the group
takes the member back with its epoch and assignment.

    MemberKey   := version int16 (3), group str, member_id str
    MemberValue := version int16 (1 or 2), instance_id nstr, client_id str,
                   subscribed_pattern nstr, session_timeout_ms int32,
                   rebalance_timeout_ms int32, state int8, member_epoch int32,
                   previous_member_epoch int32, left_static int8 (0 or 1),
                   subscribed_topics array[str],
                   assigned array[topic str, array[partition int32, epoch int32]],
                   revoking array[topic str, array[partition int32, epoch int32]],
                   target array[topic str, array[partition int32]],
                   version 2 only: protocol str ("classic" or "consumer": Kafka's)
                   (a null value: the member left, was fenced or expired)
    state       := 0 stable, 1 unrevoked_partitions, 2 unreleased_partitions
    array[x]    := count int32, then x count times
    str         := length int16, UTF-8 bytes; nstr: the same, length -1 for null

``assigned``/``revoking``: the member's partitions, each with the member epoch in which it
was given it (a commit from an older epoch is a zombie's); ``target``: its part of the
group's target assignment at the group's epoch (the EpochKey record of the group, written
in the same batch when it changed); ``protocol``: how a member of Kafka's door heartbeats,
so the group is listed and described as the same kind after its coordinator moves.
Version 1 is written for twinlog's own members (no protocol), so a broker from before
version 2 still reads their groups. The latest record of a key wins, so compaction keeps
one record per live member.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from twinlog.engine.base.errors import CorruptJournalError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.durable_member import DurableMember
from twinlog.engine.groups.group_calls import PROTOCOL_CLASSIC, PROTOCOL_CONSUMER, PROTOCOL_TWINLOG
from twinlog.engine.groups.member_assignment import MemberAssignment, MemberState

MEMBER_KEY_VERSION = 3
_MEMBER_VALUE_VERSION = 1  # a member of twinlog's own protocol
_MEMBER_VALUE_VERSION_WITH_PROTOCOL = 2  # a member of Kafka's: classic or consumer
_KAFKA_PROTOCOLS = (PROTOCOL_CLASSIC, PROTOCOL_CONSUMER)
_SHORT = struct.Struct(">h")
_INT = struct.Struct(">i")
_BYTE = struct.Struct(">b")
_FIXED = struct.Struct(">iibiib")  # timeouts, state, epochs, left_static
_STATES = (
    MemberState.STABLE,
    MemberState.UNREVOKED_PARTITIONS,
    MemberState.UNRELEASED_PARTITIONS,
)


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def string(self, text: str | None) -> None:
        if text is None:
            self.parts.append(_SHORT.pack(-1))
            return
        encoded = text.encode("utf-8")
        self.parts.append(_SHORT.pack(len(encoded)) + encoded)

    def count(self, n: int) -> None:
        self.parts.append(_INT.pack(n))

    def partitions(
        self, partitions: Mapping[TopicPartition, int] | Iterable[TopicPartition]
    ) -> None:
        """By topic; with each partition's epoch when ``partitions`` is a mapping."""
        epochs = partitions if isinstance(partitions, Mapping) else None
        by_topic: dict[str, list[int]] = {}
        for partition in sorted(partitions):
            by_topic.setdefault(partition.topic, []).append(partition.partition)
        self.count(len(by_topic))
        for topic, indexes in by_topic.items():
            self.string(topic)
            self.count(len(indexes))
            for index in indexes:
                self.parts.append(_INT.pack(index))
                if epochs is not None:
                    self.parts.append(_INT.pack(epochs[TopicPartition(topic, index)]))


class _Reader:
    """Raises struct.error, UnicodeDecodeError or ValueError on malformed bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        values = layout.unpack_from(self.data, self.position)
        self.position += layout.size
        return values

    def string(self) -> str | None:
        (length,) = self.unpack(_SHORT)
        if length == -1:
            return None
        if length < 0 or self.position + length > len(self.data):
            raise ValueError("a string runs past the end")
        text = self.data[self.position : self.position + length].decode("utf-8")
        self.position += length
        return text

    def text(self) -> str:
        text = self.string()
        if text is None:
            raise ValueError("a null where a string must be")
        return text

    def count(self) -> int:
        (n,) = self.unpack(_INT)
        if n < 0 or n > len(self.data) - self.position:  # each item takes a byte at least
            raise ValueError(f"a count of {n}")
        return n

    def partitions(self, with_epochs: bool) -> dict[TopicPartition, int]:
        found: dict[TopicPartition, int] = {}
        for _ in range(self.count()):
            topic = self.text()
            for _ in range(self.count()):
                (index,) = self.unpack(_INT)
                found[TopicPartition(topic, index)] = self.unpack(_INT)[0] if with_epochs else 0
        return found

    def end(self) -> None:
        if self.position != len(self.data):
            raise ValueError(f"{len(self.data) - self.position} bytes after the end")


def encode_member_key(group_id: str, member_id: str) -> bytes:
    writer = _Writer()
    writer.parts.append(_SHORT.pack(MEMBER_KEY_VERSION))
    writer.string(group_id)
    writer.string(member_id)
    return b"".join(writer.parts)


def decode_member_key(key: bytes) -> tuple[str, str]:
    """(group, member id) of a MemberKey."""
    reader = _Reader(key)
    try:
        (version,) = reader.unpack(_SHORT)
        if version != MEMBER_KEY_VERSION:
            raise ValueError(f"version {version}, expected {MEMBER_KEY_VERSION}")
        group_id, member_id = reader.text(), reader.text()
        reader.end()
    except (struct.error, UnicodeDecodeError, ValueError) as error:
        raise CorruptJournalError(
            f"__consumer_offsets holds a malformed member key: {error}"
        ) from None
    return group_id, member_id


def encode_member_value(member: DurableMember) -> bytes:
    assignment = member.assignment
    assert member.protocol in (PROTOCOL_TWINLOG, *_KAFKA_PROTOCOLS), member.protocol
    kafkas = member.protocol != PROTOCOL_TWINLOG
    writer = _Writer()
    writer.parts.append(
        _SHORT.pack(_MEMBER_VALUE_VERSION_WITH_PROTOCOL if kafkas else _MEMBER_VALUE_VERSION)
    )
    writer.string(member.instance_id)
    writer.string(member.client_id)
    writer.string(member.subscribed_pattern)
    writer.parts.append(
        _FIXED.pack(
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
            _STATES.index(assignment.state),
            assignment.member_epoch,
            member.previous_member_epoch,
            int(member.left_static),
        )
    )
    writer.count(len(member.subscribed_topics))
    for topic in member.subscribed_topics:
        writer.string(topic)
    writer.partitions(assignment.assigned)
    writer.partitions(assignment.revoking)
    writer.partitions(member.target)
    if kafkas:
        writer.string(member.protocol)
    return b"".join(writer.parts)


def decode_member_value(member_id: str, value: bytes) -> DurableMember:
    """The member a MemberValue holds; CorruptJournalError when it is malformed or breaks
    an assignment's invariants (``MemberAssignment``)."""
    reader = _Reader(value)
    try:
        (version,) = reader.unpack(_SHORT)
        if version not in (_MEMBER_VALUE_VERSION, _MEMBER_VALUE_VERSION_WITH_PROTOCOL):
            raise ValueError(
                f"version {version}, expected {_MEMBER_VALUE_VERSION} or "
                f"{_MEMBER_VALUE_VERSION_WITH_PROTOCOL}"
            )
        instance_id, client_id, pattern = reader.string(), reader.text(), reader.string()
        session_ms, rebalance_ms, state, epoch, previous_epoch, left_static = reader.unpack(_FIXED)
        topics = tuple(reader.text() for _ in range(reader.count()))
        assigned = reader.partitions(with_epochs=True)
        revoking = reader.partitions(with_epochs=True)
        target = frozenset(reader.partitions(with_epochs=False))
        protocol = PROTOCOL_TWINLOG
        if version == _MEMBER_VALUE_VERSION_WITH_PROTOCOL:
            protocol = reader.text()
            if protocol not in _KAFKA_PROTOCOLS:
                raise ValueError(f"protocol {protocol!r}, expected one of {_KAFKA_PROTOCOLS}")
        reader.end()
        if not 0 <= state < len(_STATES) or left_static not in (0, 1):
            raise ValueError(f"state {state}, left_static {left_static}")
        _check_assignment(_STATES[state], epoch, assigned, revoking)
    except (struct.error, UnicodeDecodeError, ValueError) as error:
        raise CorruptJournalError(
            f"__consumer_offsets holds a malformed value of member {member_id!r}: {error}"
        ) from None
    return DurableMember(
        member_id,
        instance_id,
        client_id,
        topics,
        pattern,
        session_ms,
        rebalance_ms,
        MemberAssignment(
            _STATES[state], epoch, MappingProxyType(assigned), MappingProxyType(revoking)
        ),
        previous_epoch,
        bool(left_static),
        target,
        protocol,
    )


def _check_assignment(
    state: MemberState,
    member_epoch: int,
    assigned: Mapping[TopicPartition, int],
    revoking: Mapping[TopicPartition, int],
) -> None:
    """``MemberAssignment``'s invariants, checked here too: its assertions may be off."""
    if assigned.keys() & revoking.keys():
        raise ValueError("a partition both assigned and revoking")
    if (state is MemberState.UNREVOKED_PARTITIONS) != bool(revoking):
        raise ValueError(f"state {state.value} with {len(revoking)} partition(s) revoking")
    if any(e > member_epoch for e in (*assigned.values(), *revoking.values())):
        raise ValueError(f"a partition given after member epoch {member_epoch}")
