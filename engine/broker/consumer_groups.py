"""The broker's consumer groups: membership (``engine/groups``) joined to the offsets the
broker keeps in ``__consumer_offsets``, for the group calls and the group tools.

Every call runs at the group's coordinator (``coordinator_of``: the group's offsets
partition once this broker leads it, on one node always, else NotCoordinatorError or
CoordinatorLoadInProgressError, both retriable). What a group's step changed (its new
epoch, its changed and removed members) is appended to that partition as one batch (a
plain append, ``acks=all`` on a cluster) before any member is told it: the epoch fence
stays monotonic across coordinator moves, and the coordinator that loads the partition
next takes the members back (``GroupOffsets.restore_with``), so they keep their
partitions there.

Thread rule: any thread may call (``GroupMembership`` and ``GroupOffsets`` lock).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager

from twinlog.engine.base.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    PendingTransactionError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_offset_fencing import GroupOffsetFence
from twinlog.engine.broker.group_offsets import (
    GroupOffsets,
    build_deletion_batch,
    build_group_change_batch,
    build_offset_deletions_batch,
)
from twinlog.engine.broker.partition import Partition
from twinlog.engine.groups.durable_member import GroupChange
from twinlog.engine.groups.group_calls import (
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
)
from twinlog.engine.groups.group_membership import GroupMembership
from twinlog.engine.records.batch_reader import validate_batch

# Appends records to an offsets partition and folds them into the view.
AppendGroupRecords = Callable[[Partition, bytes], None]


class ConsumerGroups:
    def __init__(
        self,
        group_offsets: GroupOffsets,
        offset_fence: GroupOffsetFence,
        coordinator_of: Callable[[str], Partition],
        append: AppendGroupRecords,
        topics: Callable[[], Mapping[str, int]],
        heartbeat_interval_ms: int,
    ) -> None:
        self._offsets = group_offsets
        self._fence = offset_fence
        self._coordinator_of = coordinator_of
        self._append = append
        self._topics = topics
        self.membership = GroupMembership(
            topics,
            None,
            group_offsets.group_epoch,
            heartbeat_interval_ms,
            persist_change=self._persist_change,
        )
        group_offsets.restore_with(self.membership.restore)

    def _persist_change(self, change: GroupChange) -> None:
        self._append(self._coordinator_of(change.group_id), build_group_change_batch(change))

    def heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer:
        self._coordinator_of(call.group_id)
        return self.membership.heartbeat(call)

    def committing(
        self, group_id: str, member: GroupMemberRef, partitions: Iterable[TopicPartition]
    ) -> AbstractContextManager[None]:
        """Raise unless this commit may go on (a zombie's is refused: ``engine/groups``);
        else hold the group's membership still while the caller writes the commit."""
        return self.membership.committing(
            group_id, member.member_id, member.member_epoch, partitions, member.instance_id
        )

    def list_groups(self) -> list[GroupListing]:
        """The groups this broker coordinates: with members, or with committed offsets."""
        listings = {g.group_id: g for g in self.membership.listings()}
        for group_id in self._offsets.group_ids():
            listings.setdefault(group_id, GroupListing(group_id, "empty", 0))
        return [listings[g] for g in sorted(listings)]

    def describe_group(self, group_id: str) -> GroupDescription:
        self._coordinator_of(group_id)
        description = self.membership.describe(group_id)
        committed = self._offsets.offsets_of(group_id)
        if description is None:
            if not committed and group_id not in self._offsets.group_ids():
                raise GroupIdNotFoundError(
                    f"no group {group_id!r}: it has no members and no committed offsets "
                    "(twinlog groups list shows the groups there are)"
                )
            description = GroupDescription(group_id, "empty", self._offsets.group_epoch(group_id))
        return dataclasses.replace(description, committed=tuple(sorted(committed.items())))

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group: its committed offsets and its epoch (NonEmptyGroupError
        while it has members; PendingTransactionError while a transaction holds offsets)."""
        target = self._coordinator_of(group_id)
        with self.membership.emptied(group_id, "deleting it"):
            committed = self._offsets.offsets_of(group_id)
            known = bool(committed) or group_id in self._offsets.group_ids()
            if not known and self.membership.describe(group_id) is None:
                raise GroupIdNotFoundError(f"no group {group_id!r} to delete")
            self._fence.check_plain_commit(group_id, committed)
            self._append(target, build_deletion_batch(group_id, committed))
            self.membership.forget(group_id)

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]:
        """Delete the group's committed offsets of ``partitions`` (Kafka's OffsetDelete):
        each partition's answer, None when its offset is deleted (or it had none).

        The group must exist (else GroupIdNotFoundError). A partition of a topic one of the
        group's members reads is refused (GroupSubscribedToTopicError), one a transaction
        holds too (PendingTransactionError, retriable), and one of no topic that has no
        offset either (UnknownTopicOrPartitionError; the offsets of a deleted topic may be
        deleted). The others' deletions are appended as one batch, so they survive
        restarts and compaction."""
        target = self._coordinator_of(group_id)
        wanted = sorted({TopicPartition(*p) for p in partitions})
        with self.membership.subscriptions_held(group_id) as subscribed:
            committed = self._offsets.offsets_of(group_id)
            if subscribed is None and not committed and group_id not in self._offsets.group_ids():
                raise GroupIdNotFoundError(
                    f"no group {group_id!r}: it has no members and no committed offsets "
                    "(twinlog groups list shows the groups there are)"
                )
            topics = self._topics()
            holders = self._offsets.holders(group_id, wanted)
            answers: dict[TopicPartition, TwinlogError | None] = {}
            for partition in wanted:
                answers[partition] = _deletion_refusal(
                    group_id, partition, partition in committed, topics, subscribed, holders
                )
            deleted = [p for p, refusal in answers.items() if refusal is None and p in committed]
            if deleted:
                self._append(target, build_offset_deletions_batch(group_id, deleted))
        return answers

    def drop_partition(self, partition_index: int) -> None:
        """Forget the membership of the groups of offsets partition ``partition_index``
        (another broker coordinates them now, or this one loads them afresh)."""
        self.membership.drop_groups(
            lambda group_id: self._offsets.partition_for(group_id).partition == partition_index
        )


def _deletion_refusal(
    group_id: str,
    partition: TopicPartition,
    has_offset: bool,
    topics: Mapping[str, int],
    subscribed: frozenset[str] | None,
    holders: Mapping[TopicPartition, int],
) -> TwinlogError | None:
    """Why the group's offset of ``partition`` may not be deleted now (None: it may)."""
    if not has_offset and not 0 <= partition.partition < topics.get(partition.topic, 0):
        return UnknownTopicOrPartitionError(
            f"no partition {partition} and group {group_id!r} has no offset for it: check "
            "the topic and partition (twinlog topics list)"
        )
    if subscribed and partition.topic in subscribed:
        return GroupSubscribedToTopicError(
            f"a member of group {group_id!r} reads topic {partition.topic!r}: stop the "
            "group's consumers (or let them unsubscribe from it), then delete its offsets"
        )
    if partition in holders:
        return PendingTransactionError(
            f"group {group_id!r} has an offset for {partition} in transaction "
            f"{holders[partition]}, not complete yet; retry shortly"
        )
    return None


def append_group_records(
    observe: Callable[[Partition, int, int], None],
) -> AppendGroupRecords:
    """``AppendGroupRecords`` over a partition's plain append (acks=all on a cluster
    leader) and the broker's fold of what it appended (``observe``)."""

    def append(partition: Partition, batch: bytes) -> None:
        result = partition.append_plain(batch, validate_batch(batch))
        observe(partition, result.base_offset, partition.log.log_end_offset)

    return append
