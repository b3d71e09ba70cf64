"""What a subscribed consumer tells its application about its partitions, and what it gives a
transactional producer (KIP-447): Kafka's ``ConsumerRebalanceListener`` and
``ConsumerGroupMetadata``, with kafka-python's method names.

The listener's methods run on the consumer's thread, inside ``poll`` (and ``close``):

    on_partitions_revoked(revoked)   before partitions go to other members: commit what
                                     was processed (auto-commit has committed already)
    on_partitions_assigned(assigned) after partitions were given (positions start at the
                                     group's committed offsets)
    on_partitions_lost(lost)         the membership was lost (session timeout, fenced):
                                     other members may own them already, so do not commit;
                                     by default it calls on_partitions_revoked, as Java's

confluent-kafka's style works too: ``subscribe(topics, on_assign=f, on_revoke=f,
on_lost=f)`` with ``f(consumer, partitions)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import NO_MEMBER_EPOCH, GroupMemberRef


class ConsumerRebalanceListener:
    """Subclass and override what you need; every method does nothing by default (but
    ``on_partitions_lost``, which calls ``on_partitions_revoked``)."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)


PartitionsCallback = Callable[[Any, list[TopicPartition]], None]


class CallbackListener(ConsumerRebalanceListener):
    """confluent-kafka's callbacks ``f(consumer, partitions)`` as a listener."""

    def __init__(
        self,
        consumer: Any,
        on_assign: PartitionsCallback | None,
        on_revoke: PartitionsCallback | None,
        on_lost: PartitionsCallback | None,
    ) -> None:
        self._consumer = consumer
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if self._on_revoke is not None:
            self._on_revoke(self._consumer, revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        if self._on_assign is not None:
            self._on_assign(self._consumer, assigned)

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        if self._on_lost is not None:
            self._on_lost(self._consumer, lost)
        else:
            self.on_partitions_revoked(lost)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """``Consumer.group_metadata()``: pass it to ``Producer.send_offsets_to_transaction`` so
    the group's coordinator fences a zombie by its generation (KIP-447). A consumer that is
    not a member (``assign()``) gives one without a member: accepted only while the group
    has no members."""

    group_id: str
    member_id: str = ""
    member_epoch: int = NO_MEMBER_EPOCH
    group_instance_id: str | None = None

    @property
    def generation_id(self) -> int:
        """kafka-python's and the classic protocol's name for the member epoch."""
        return self.member_epoch

    def member(self) -> GroupMemberRef:
        return GroupMemberRef(self.member_id, self.member_epoch, self.group_instance_id)
