"""The rows of ``Admin.group_offsets`` and ``Admin.reset_group_offsets``, and the arithmetic
behind them (kafka-consumer-groups.sh's ``--describe`` and ``--reset-offsets``), free of I/O.

``ResetTo`` says where a reset moves each partition; every target is then clamped into
``[earliest, latest]`` of the partition, as Kafka's tool does, so a reset never leaves a
group at an offset it cannot read from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import GroupDescription

NO_COMMITTED_OFFSET = -1  # what fetch_offsets answers for a partition without one

RESET_KINDS = ("earliest", "latest", "offset", "timestamp", "shift")


@dataclass(frozen=True)
class PartitionLag:
    """One partition a group has committed an offset for, or that a member owns.

    ``log_end_offset``: where a consumer could read to now (the high watermark); None when
    the partition no longer exists (its topic was deleted after the group committed).
    ``lag``: ``log_end_offset - committed_offset``; None without both. ``member_id`` and
    ``client_id``: the member that owns the partition, None when no member does.
    """

    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int | None
    lag: int | None
    member_id: str | None = None
    client_id: str | None = None


@dataclass(frozen=True)
class OffsetReset:
    """One partition of a reset: the group's offset before (None: none committed) and after."""

    topic: str
    partition: int
    previous_offset: int | None
    new_offset: int


@dataclass(frozen=True)
class ResetTo:
    """Where ``reset_group_offsets`` moves each partition; build it with a class method:

    ``ResetTo.earliest()``, ``ResetTo.latest()``, ``ResetTo.offset(n)``,
    ``ResetTo.timestamp(when)`` (a datetime, naive meaning UTC, or milliseconds since the
    epoch: what ``list_offset`` answers, the first offset of the first batch with a record
    at or after it, else the log end) and
    ``ResetTo.shift_by(n)`` (the committed offset plus n, which may be negative).
    """

    kind: str  # one of RESET_KINDS
    value: int = 0

    def __post_init__(self) -> None:
        if self.kind not in RESET_KINDS:
            raise InvalidConfigError(
                f"reset kind {self.kind!r} is not one of {', '.join(RESET_KINDS)}"
            )
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise InvalidConfigError(f"reset value {self.value!r} is not a whole number")

    @classmethod
    def earliest(cls) -> ResetTo:
        return cls("earliest")

    @classmethod
    def latest(cls) -> ResetTo:
        return cls("latest")

    @classmethod
    def offset(cls, offset: int) -> ResetTo:
        return cls("offset", offset)

    @classmethod
    def timestamp(cls, when: datetime | int) -> ResetTo:
        if isinstance(when, datetime):
            aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
            return cls("timestamp", round(aware.timestamp() * 1000))
        return cls("timestamp", when)

    @classmethod
    def shift_by(cls, delta: int) -> ResetTo:
        return cls("shift", delta)


def committed_or_none(offset: int | None) -> int | None:
    return None if offset is None or offset == NO_COMMITTED_OFFSET else offset


def lag_rows(
    description: GroupDescription, log_end_of: Callable[[TopicPartition], int | None]
) -> list[PartitionLag]:
    """A row per partition the group has committed for or a member owns, by topic and
    partition. A partition being revoked is still its member's until it says so."""
    owners = {
        partition: member
        for member in description.members
        for partition in (*member.assigned, *member.revoking)
    }
    committed = {TopicPartition(*p): offset for p, offset in description.committed}
    rows = []
    for partition in sorted(committed.keys() | owners.keys()):
        offset = committed_or_none(committed.get(partition))
        end = log_end_of(partition)
        owner = owners.get(partition)
        rows.append(
            PartitionLag(
                partition.topic,
                partition.partition,
                offset,
                end,
                None if offset is None or end is None else end - offset,
                None if owner is None else owner.member_id,
                None if owner is None else owner.client_id,
            )
        )
    return rows


def partitions_without_commit(
    partitions: list[TopicPartition], committed: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    return [p for p in partitions if committed_or_none(committed.get(p)) is None]


def clamp(offset: int, earliest: int, latest: int) -> int:
    """Into ``[earliest, latest]``: below the log start there is nothing left to read, and
    past the log end a consumer would be told its offset is out of range."""
    return max(earliest, min(offset, latest))


def reset_offset(to: ResetTo, previous: int | None, list_offset: Callable[[str | int], int]) -> int:
    """The new offset of one partition; ``list_offset`` asks the partition's leader
    (``"earliest"``, ``"latest"`` or a timestamp in ms). ``previous`` must be given for a
    shift (the caller refuses partitions without one first, naming them all)."""
    earliest = list_offset("earliest")
    latest = list_offset("latest")
    if to.kind == "earliest":
        return earliest
    if to.kind == "latest":
        return latest
    if to.kind == "timestamp":
        wanted = list_offset(to.value)
    elif to.kind == "shift":
        assert previous is not None, "a shift needs the committed offset"
        wanted = previous + to.value
    else:
        wanted = to.value
    return clamp(wanted, earliest, latest)
