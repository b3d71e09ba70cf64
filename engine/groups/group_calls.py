"""The calls of consumer group membership, and their answers (KIP-848's ConsumerGroupHeartbeat
and ConsumerGroupDescribe, in twinlog's words). Plain values: the engine, the gRPC layer and
the clients share them.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.engine.base.types import TopicPartition

# Member epochs with a meaning of their own in a heartbeat (Kafka's).
JOIN_EPOCH = 0  # join (or join again after being fenced)
LEAVE_EPOCH = -1  # leave: the member's partitions go to the others now
STATIC_LEAVE_EPOCH = -2  # a static member leaves for a restart: its partitions wait for it
NO_MEMBER_EPOCH = -1  # in a commit: not from a group member (assign(), tools)

# Which protocol a member speaks, where Kafka tells them apart: a group is of one kind
# (Kafka refuses a member of the other kind while it has members). twinlog's own
# consumers ("") join a group of either kind.
PROTOCOL_TWINLOG = ""
PROTOCOL_CLASSIC = "classic"  # Kafka's JoinGroup/SyncGroup/Heartbeat
PROTOCOL_CONSUMER = "consumer"  # Kafka's ConsumerGroupHeartbeat (KIP-848)
REBALANCE_TIMEOUT_MS_DEFAULT = 300_000

# What a group of the broker is, as kafka-consumer-groups.sh says it.
GROUP_STATES = ("empty", "reconciling", "stable", "dead")


@dataclass(frozen=True)
class GroupMemberRef:
    """Who commits offsets: a member of the group in a generation (what Kafka's
    ``ConsumerGroupMetadata`` carries besides the group id), or nobody's
    (``OUTSIDE_ANY_GROUP``: ``assign()``, tools)."""

    member_id: str = ""
    member_epoch: int = NO_MEMBER_EPOCH
    instance_id: str | None = None


OUTSIDE_ANY_GROUP = GroupMemberRef()

NO_LEADER_EPOCH = -1  # a commit that names no leader epoch (Kafka's -1)


@dataclass(frozen=True)
class OffsetAndMetadata:
    """One committed offset as Kafka's clients commit it: the offset, the client's own
    ``metadata`` string (kept and answered back as given; "" when none) and the
    ``leader_epoch`` of the record it follows (``NO_LEADER_EPOCH`` when not known)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True)
class GroupHeartbeat:
    """One heartbeat of a member: the whole subscription and what it owns, every time (a
    group's members are few; a full heartbeat cannot be misread after a lost answer).

    ``member_id``: the consumer's own (a UUID it keeps until it closes); "" lets the
    coordinator name one at a join. ``subscribed_topics``: the topics the member reads; for
    a pattern subscription, the topics the consumer found matching ``subscribed_pattern``
    (which the coordinator only shows: it never runs a member's regular expression).
    ``owned``: the partitions the member holds now (after its revocations).

    Kafka's ConsumerGroupHeartbeat sends only what changed: None in ``subscribed_topics``
    or ``rebalance_timeout_ms`` keeps the member's, None in ``owned`` says nothing of what
    it holds (a revocation is not finished by it). ``protocol``: the door's (PROTOCOL_*).
    """

    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topics: tuple[str, ...] | None = ()
    subscribed_pattern: str | None = None
    owned: tuple[TopicPartition, ...] | None = ()
    instance_id: str | None = None
    client_id: str = ""
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int | None = REBALANCE_TIMEOUT_MS_DEFAULT
    protocol: str = PROTOCOL_TWINLOG


@dataclass(frozen=True)
class GroupHeartbeatAnswer:
    """``assigned``: what the member may own now; a partition it owns outside it is to be
    revoked (committed, then given up, then said in the next heartbeat). ``member_epoch``:
    the generation to carry in commits (``Consumer.group_metadata()``)."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assigned: tuple[TopicPartition, ...] = ()
    # ``assigned`` differs from the member's before this heartbeat (Kafka's heartbeat
    # answers the assignment only then, or to a full heartbeat)
    assignment_changed: bool = True


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    member_epoch: int
    state: str
    subscribed_topics: tuple[str, ...]
    subscribed_pattern: str | None
    assigned: tuple[TopicPartition, ...]
    revoking: tuple[TopicPartition, ...]
    target: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    """``committed``: the group's committed offsets, by partition (filled by the broker,
    which keeps them; membership does not)."""

    group_id: str
    state: str  # one of GROUP_STATES
    group_epoch: int
    members: tuple[MemberDescription, ...] = ()
    committed: tuple[tuple[TopicPartition, int], ...] = ()
    group_type: str = PROTOCOL_CLASSIC  # as Kafka's tools list it: classic or consumer


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    member_count: int
    group_type: str = PROTOCOL_CLASSIC
