"""What a group's coordinator makes durable of its members, so that a member keeps its
place (its epoch and partitions) when the coordinator moves to another broker or restarts
(KIP-848's member metadata, target and current assignment records, in one value).

Only what a heartbeat's answer, a commit's check or the next target depends on is kept:
the member's identity, protocol and subscription, its timeouts, its assignment with each
partition's assignment epoch, and its share of the group's target assignment. Deadlines
are not: a coordinator that takes the group back gives every member a full session (and a
revoking one a full rebalance timeout) from then on.

A change (``GroupChange``) is what one step of the group (a heartbeat, a leave, an expiry
round) altered: written whole, before any member is told of it, so whatever a member was
told is durable. Plain values: the broker encodes them (``engine/broker``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import PROTOCOL_TWINLOG
from twinlog.engine.groups.member_assignment import MemberAssignment


@dataclass(frozen=True)
class DurableMember:
    """One member as the log keeps it; ``target``: its part of the group's target
    assignment at the group's epoch (not derivable: the assignor is sticky)."""

    member_id: str
    instance_id: str | None
    client_id: str
    subscribed_topics: tuple[str, ...]
    subscribed_pattern: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: MemberAssignment
    previous_member_epoch: int
    left_static: bool
    target: frozenset[TopicPartition]
    # the protocol it heartbeats in (``group_calls.PROTOCOL_*``): a group taken back from
    # the log is of the kind Kafka's tools saw (consumer, classic) before its first heartbeat
    protocol: str = PROTOCOL_TWINLOG


@dataclass(frozen=True)
class GroupChange:
    """What one step changed: the new group epoch (None: unchanged), the members new or
    changed, and the ids of the members removed."""

    group_id: str
    group_epoch: int | None
    members: tuple[DurableMember, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredGroup:
    """A group as a coordinator loads it: its last durable epoch and members."""

    group_id: str
    group_epoch: int
    members: tuple[DurableMember, ...]


PersistChange = Callable[[GroupChange], None]


def epochs_only(persist_epoch: Callable[[str, int], None]) -> PersistChange:
    """A coordinator that makes only epochs durable (its members live in its memory)."""

    def persist(change: GroupChange) -> None:
        if change.group_epoch is not None:
            persist_epoch(change.group_id, change.group_epoch)

    return persist
