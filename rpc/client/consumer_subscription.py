"""What a consumer reads and from where: ``SubscriptionState``, as Kafka's consumer has it.

It owns the partitions assigned (by hand with ``assign``, or by the group through a
subscription), each one's position (the offset of the next record ``poll`` returns), which
of them are paused, and the subscription itself: the group membership
(``consumer_membership``), the rebalance listener, and who the consumer commits as since
its last poll. It does no I/O. ``consumer.Consumer`` changes the assignment and seeks;
``consumer_fetcher`` reads the positions and advances them past what ``poll`` returns;
``consumer_positions`` gives a partition its starting position.

Thread rule: the consumer's thread only (the one thread that uses the consumer, as
Kafka's); nothing here is locked. The heartbeat thread never touches this state: it
reaches the consumer's thread through ``ConsumerMembership.pending_changes``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import OUTSIDE_ANY_GROUP, GroupMemberRef
from twinlog.rpc.client.consumer_membership import ConsumerMembership, Subscription
from twinlog.rpc.client.rebalance_listener import (
    CallbackListener,
    ConsumerRebalanceListener,
    PartitionsCallback,
)

OFFSET_RESETS = ("earliest", "latest", "none")


def as_topic_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(*item) for item in partitions]


def subscription_of(topics: Iterable[str] | str, pattern: str | None) -> Subscription:
    """``subscribe()``'s topics or pattern, checked: one of them, and a pattern that
    compiles (InvalidConfigError otherwise)."""
    chosen = (topics,) if isinstance(topics, str) else tuple(topics)
    if bool(chosen) == (pattern is not None):
        raise InvalidConfigError("subscribe() takes topics or a pattern, one of them")
    compiled = None
    if pattern is not None:
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise InvalidConfigError(
                f"pattern {pattern!r} is not a valid regular expression: {error}"
            ) from None
    return Subscription(tuple(sorted(set(chosen))), compiled)


def listener_of(
    consumer: Any,
    listener: ConsumerRebalanceListener | None,
    on_assign: PartitionsCallback | None,
    on_revoke: PartitionsCallback | None,
    on_lost: PartitionsCallback | None,
) -> ConsumerRebalanceListener:
    """``subscribe()``'s listener, or confluent-kafka's callbacks as one (not both)."""
    callbacks = on_assign or on_revoke or on_lost
    if listener is not None and callbacks:
        raise InvalidConfigError("pass a listener or on_* callbacks, not both")
    if listener is None and callbacks:
        return CallbackListener(consumer, on_assign, on_revoke, on_lost)
    return listener or ConsumerRebalanceListener()


class SubscriptionState:
    """Every method runs on the consumer's thread and changes only this object."""

    def __init__(self) -> None:
        self._assigned: tuple[TopicPartition, ...] = ()
        # Positions exist for assigned partitions only: set_assignment drops the others.
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        # group membership (subscribe), None while assigned by hand or not at all
        self.membership: ConsumerMembership | None = None
        self.listener = ConsumerRebalanceListener()
        # who commits: the member as of the last poll's changes (``MembershipChanges``)
        self.member_at_poll = OUTSIDE_ANY_GROUP

    # --- assignment --------------------------------------------------------------------

    @property
    def assigned(self) -> tuple[TopicPartition, ...]:
        """The assigned partitions, in the order they were given."""
        return self._assigned

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Read exactly ``partitions`` from now on. Returns those that left the
        assignment: their positions and pause are gone, and the caller drops what it holds
        of them (fetches, buffered records, a starting-position lookup)."""
        assigned = tuple(dict.fromkeys(partitions))
        keep = set(assigned)
        dropped = [tp for tp in self._assigned if tp not in keep]
        self._assigned = assigned
        for topic_partition in dropped:
            self._positions.pop(topic_partition, None)
        self._paused &= keep
        return dropped

    def require_assigned(self, topic_partition: Any) -> TopicPartition:
        found = TopicPartition(*topic_partition)
        if found not in self._assigned:
            raise InvalidConfigError(
                f"{found} is not assigned to this consumer; call assign() with it first"
            )
        return found

    # --- pausing -----------------------------------------------------------------------

    def pause(self, partitions: Iterable[Any]) -> None:
        for topic_partition in as_topic_partitions(partitions):
            self._paused.add(self.require_assigned(topic_partition))

    def resume(self, partitions: Iterable[Any]) -> None:
        for topic_partition in as_topic_partitions(partitions):
            self._paused.discard(topic_partition)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def fetchable(self) -> list[TopicPartition]:
        """The assigned partitions not paused: those fetched and returned by ``poll``."""
        return [tp for tp in self._assigned if tp not in self._paused]

    # --- positions ---------------------------------------------------------------------

    def seek(self, topic_partition: Any, offset: int) -> TopicPartition:
        """The next record of this assigned partition is at ``offset``. The caller drops
        what the fetcher holds of it from before."""
        found = self.require_assigned(topic_partition)
        if offset < 0:
            raise InvalidConfigError(f"offset {offset} is negative; offsets start at 0")
        self._positions[found] = offset
        return found

    def position(self, topic_partition: TopicPartition) -> int | None:
        """None before its starting position is known."""
        return self._positions.get(topic_partition)

    def advance(self, topic_partition: TopicPartition, offset: int) -> None:
        """The fetcher handed out (or stepped over) the records before ``offset``."""
        self._positions[topic_partition] = offset

    def without_position(self) -> list[TopicPartition]:
        return [tp for tp in self._assigned if tp not in self._positions]

    def start_at(self, found: Mapping[TopicPartition, int]) -> None:
        """Starting positions looked up: each one counts for a partition still assigned
        and not sought meanwhile (a seek() made during the lookup wins)."""
        assigned = set(self._assigned)
        for topic_partition, offset in found.items():
            if topic_partition in assigned:
                self._positions.setdefault(topic_partition, offset)

    def positions(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """The known positions (of ``partitions``, or of all): what a commit stores."""
        if partitions is None:
            return dict(self._positions)
        return {tp: self._positions[tp] for tp in partitions if tp in self._positions}

    # --- the subscription --------------------------------------------------------------

    def member(self) -> GroupMemberRef:
        """Who commits: the member as of the last poll; outside any group when the
        partitions were assigned by hand."""
        return OUTSIDE_ANY_GROUP if self.membership is None else self.member_at_poll

    def subscribed_topics(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matched so far)."""
        return set() if self.membership is None else self.membership.subscribed_topics()
