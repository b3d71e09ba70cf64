"""OffsetCommit and OffsetFetch: a group's committed offsets, kept by the broker.

A commit from outside the group's membership (generation -1 and no member id: a consumer
that ``assign()``s, a tool) is the broker's commit from outside any group; one naming a
member is checked by the broker against the group's members (twinlog's groups,
``engine/groups``). Only the offset is kept: a commit's metadata string and leader epoch
are not stored, and OffsetFetch answers metadata "" and leader epoch -1.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from twinlog.engine.base.errors import GroupIdNotFoundError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import (
    NO_MEMBER_EPOCH,
    OUTSIDE_ANY_GROUP,
    GroupMemberRef,
)
from twinlog.rpc.kafka.access import may, require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE, code_of
from twinlog.rpc.policy.auth import Operation, Resource

NO_OFFSET = -1
NO_LEADER_EPOCH = -1
GROUPS_ARRAY_VERSION = 8  # from this version an OffsetFetch names many groups

CommitTopicAnswer = OffsetCommitResponse.OffsetCommitResponseTopic
CommitPartitionAnswer = CommitTopicAnswer.OffsetCommitResponsePartition


def member_of(member_id: str | None, member_epoch: int, instance_id: str | None) -> GroupMemberRef:
    """The committing member, or OUTSIDE_ANY_GROUP for a commit from outside membership."""
    if not member_id and member_epoch == NO_MEMBER_EPOCH:
        return OUTSIDE_ANY_GROUP
    return GroupMemberRef(member_id or "", member_epoch, instance_id)


def handle_offset_commit(
    request: OffsetCommitRequest, version: int, context: KafkaContext
) -> OffsetCommitResponse:
    offsets = {
        TopicPartition(topic.name, item.partition_index): item.committed_offset
        for topic in request.topics
        for item in topic.partitions
    }
    member = member_of(
        request.member_id, request.generation_id_or_member_epoch, request.group_instance_id
    )
    guard, principal = context.guard, context.connection.principal
    try:
        require(guard, principal, Operation.READ, (request.group_id,), Resource.GROUP)
        require(guard, principal, Operation.READ, sorted({tp.topic for tp in offsets}))
        context.broker.commit_offsets(request.group_id, offsets, member)
        error_code = NONE
    except TwinlogError as error:
        error_code = code_of(error, OffsetCommitRequest.API_KEY)
    topics = [
        CommitTopicAnswer(
            name=topic.name,
            partitions=[
                CommitPartitionAnswer(partition_index=item.partition_index, error_code=error_code)
                for item in topic.partitions
            ],
        )
        for topic in request.topics
    ]
    return OffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)


def _committed(
    context: KafkaContext, group_id: str, wanted: list[TopicPartition] | None
) -> dict[TopicPartition, int]:
    """The group's offsets of ``wanted`` (None: every partition it committed whose topic
    the caller may read)."""
    guard, principal = context.guard, context.connection.principal
    require(guard, principal, Operation.READ, (group_id,), Resource.GROUP)
    if wanted is None:
        try:
            committed = context.broker.describe_group(group_id).committed
        except GroupIdNotFoundError:  # a group that never committed has no offsets
            return {}
        return {
            topic_partition: offset
            for topic_partition, offset in committed
            if may(guard, principal, Operation.READ, topic_partition.topic, Resource.TOPIC)
        }
    require(guard, principal, Operation.READ, sorted({tp.topic for tp in wanted}))
    return context.broker.fetch_offsets(group_id, wanted)


def _wanted(topics: list[Any] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [
        TopicPartition(topic.name, index) for topic in topics for index in topic.partition_indexes
    ]


def _by_topic(offsets: dict[TopicPartition, int]) -> dict[str, dict[int, int]]:
    grouped: dict[str, dict[int, int]] = {}
    for topic_partition, offset in sorted(offsets.items()):
        grouped.setdefault(topic_partition.topic, {})[topic_partition.partition] = offset
    return grouped


def handle_offset_fetch(
    request: OffsetFetchRequest, version: int, context: KafkaContext
) -> OffsetFetchResponse:
    if version >= GROUPS_ARRAY_VERSION:
        groups = [_group_answer(context, group) for group in request.groups]
        return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)
    Topic = OffsetFetchResponse.OffsetFetchResponseTopic
    Partition = Topic.OffsetFetchResponsePartition
    try:
        offsets = _committed(context, request.group_id, _wanted(request.topics))
        error_code = NONE
    except TwinlogError as error:
        offsets, error_code = {}, code_of(error, OffsetFetchRequest.API_KEY)
        if request.topics is not None:
            offsets = dict.fromkeys(_wanted(request.topics) or [], NO_OFFSET)
    topics = _topic_answers(Topic, Partition, offsets, error_code)
    return OffsetFetchResponse(
        version=version, throttle_time_ms=0, topics=topics, error_code=error_code
    )


def _group_answer(context: KafkaContext, group: Any) -> Any:
    Group = OffsetFetchResponse.OffsetFetchResponseGroup
    Topic = Group.OffsetFetchResponseTopics
    Partition = Topic.OffsetFetchResponsePartitions
    try:
        offsets = _committed(context, group.group_id, _wanted(group.topics))
    except TwinlogError as error:
        return Group(
            group_id=group.group_id,
            topics=[],
            error_code=code_of(error, OffsetFetchRequest.API_KEY),
        )
    topics = _topic_answers(Topic, Partition, offsets, NONE)
    return Group(group_id=group.group_id, topics=topics, error_code=NONE)


def _topic_answers(
    topic_class: Any, partition_class: Any, offsets: dict[TopicPartition, int], error_code: int
) -> list[Any]:
    """OffsetFetch's per-topic answers, in the message classes of the version answered
    (the topics of v0-7, or of a group from v8)."""
    return [
        topic_class(
            name=name,
            partitions=[
                partition_class(
                    partition_index=index,
                    committed_offset=offset,
                    committed_leader_epoch=NO_LEADER_EPOCH,
                    metadata="",
                    error_code=error_code,
                )
                for index, offset in partitions.items()
            ],
        )
        for name, partitions in _by_topic(offsets).items()
    ]
