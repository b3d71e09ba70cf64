"""OffsetCommit and OffsetFetch: a group's committed offsets, kept by the broker.

A commit from outside the group's membership (generation -1 and no member id: a consumer
that ``assign()``s, a tool) is the broker's commit from outside any group; one naming a
member is checked by the broker against the group's members (twinlog's groups,
``engine/groups``). A commit's metadata string (null kept as "") and leader epoch (v6+)
are kept with its offset and answered back by OffsetFetch; a partition whose metadata is
longer than the broker's ``offset_metadata_max_bytes`` is answered
OFFSET_METADATA_TOO_LARGE and not committed, the others are. A partition whose offset a
transaction not complete yet holds is answered UNSTABLE_OFFSET_COMMIT on its own
(KIP-447), the others with their offsets; the group's error stays NONE.

A member of KIP-848's protocol commits with OffsetCommit v9's member id and member epoch
(the generation field), checked as any member's commit; a stale epoch is answered
STALE_MEMBER_EPOCH to it. OffsetFetch v9's member id and epoch, when given, are checked
as Kafka checks them in a group of that protocol: the member must be the group's
(UNKNOWN_MEMBER_ID) at that very epoch (STALE_MEMBER_EPOCH; the client asks again after
its next heartbeat).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from twinlog.engine.base.errors import (
    PendingTransactionError,
    StaleMemberEpochError,
    TwinlogError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.groups.group_calls import (
    NO_MEMBER_EPOCH,
    OUTSIDE_ANY_GROUP,
    PROTOCOL_CONSUMER,
    GroupMemberRef,
    OffsetAndMetadata,
)
from twinlog.rpc.kafka.access import may, require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSTABLE_OFFSET_COMMIT,
    code_of,
)
from twinlog.rpc.policy.auth import Operation, Resource

NO_OFFSET = -1
GROUPS_ARRAY_VERSION = 8  # from this version an OffsetFetch names many groups
MEMBER_EPOCH_VERSION = 9  # from this version a commit may carry a KIP-848 member epoch

_NONE_COMMITTED = OffsetAndMetadata(NO_OFFSET)  # what OffsetFetch answers without an offset

CommitTopicAnswer = OffsetCommitResponse.OffsetCommitResponseTopic
CommitPartitionAnswer = CommitTopicAnswer.OffsetCommitResponsePartition


def member_of(member_id: str | None, member_epoch: int, instance_id: str | None) -> GroupMemberRef:
    """The committing member, or OUTSIDE_ANY_GROUP for a commit from outside membership."""
    if not member_id and member_epoch == NO_MEMBER_EPOCH:
        return OUTSIDE_ANY_GROUP
    return GroupMemberRef(member_id or "", member_epoch, instance_id)


def offsets_of(topics: list[Any]) -> dict[TopicPartition, OffsetAndMetadata]:
    """The offsets an OffsetCommit or TxnOffsetCommit names, each with its metadata (null
    kept as "", as Kafka does) and leader epoch (-1 in versions without one)."""
    return {
        TopicPartition(topic.name, item.partition_index): OffsetAndMetadata(
            item.committed_offset, item.committed_metadata or "", item.committed_leader_epoch
        )
        for topic in topics
        for item in topic.partitions
    }


def commit_answers(
    topics: list[Any], error_code: int, too_large: set[TopicPartition]
) -> list[tuple[str, list[tuple[int, int]]]]:
    """(topic, [(partition, error code)]) of a commit: OFFSET_METADATA_TOO_LARGE for the
    partitions in ``too_large``, ``error_code`` for the others."""
    return [
        (
            topic.name,
            [
                (
                    item.partition_index,
                    OFFSET_METADATA_TOO_LARGE
                    if TopicPartition(topic.name, item.partition_index) in too_large
                    else error_code,
                )
                for item in topic.partitions
            ],
        )
        for topic in topics
    ]


def handle_offset_commit(
    request: OffsetCommitRequest, version: int, context: KafkaContext
) -> OffsetCommitResponse:
    offsets = offsets_of(request.topics)
    too_large = context.broker.metadata_too_large(offsets)
    member = member_of(
        request.member_id, request.generation_id_or_member_epoch, request.group_instance_id
    )
    guard, principal = context.guard, context.connection.principal
    try:
        require(guard, principal, Operation.READ, (request.group_id,), Resource.GROUP)
        require(guard, principal, Operation.READ, sorted({tp.topic for tp in offsets}))
        wanted = {p: o for p, o in offsets.items() if p not in too_large}
        context.broker.commit_offsets(request.group_id, wanted, member)
        error_code = NONE
    except TwinlogError as error:
        error_code = _commit_code(context, request, version, error)
    topics = [
        CommitTopicAnswer(
            name=name,
            partitions=[
                CommitPartitionAnswer(partition_index=index, error_code=code)
                for index, code in partitions
            ],
        )
        for name, partitions in commit_answers(request.topics, error_code, too_large)
    ]
    return OffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)


def _commit_code(
    context: KafkaContext, request: OffsetCommitRequest, version: int, error: TwinlogError
) -> int:
    """A stale member epoch is STALE_MEMBER_EPOCH to a KIP-848 member (v9+, as Kafka), and
    ILLEGAL_GENERATION to a classic one, whose generation it is."""
    if (
        isinstance(error, StaleMemberEpochError)
        and version >= MEMBER_EPOCH_VERSION
        and context.broker.classic_member(request.group_id, request.member_id) is None
    ):
        return STALE_MEMBER_EPOCH
    return code_of(error, OffsetCommitRequest.API_KEY)


def _committed(
    context: KafkaContext, group_id: str, wanted: list[TopicPartition] | None
) -> tuple[dict[TopicPartition, OffsetAndMetadata], set[TopicPartition]]:
    """The group's offsets of ``wanted`` (None: every partition it committed whose topic
    the caller may read), and those of them a transaction not complete yet holds
    (answered UNSTABLE_OFFSET_COMMIT on their own, as Kafka does since KIP-447: a client
    retries those and takes the others)."""
    guard, principal = context.guard, context.connection.principal
    require(guard, principal, Operation.READ, (group_id,), Resource.GROUP)
    if wanted is None:  # a group that never committed has no offsets
        readable = {
            topic_partition: committed
            for topic_partition, committed in context.broker.fetch_committed(group_id, None).items()
            if may(guard, principal, Operation.READ, topic_partition.topic, Resource.TOPIC)
        }
        return readable, set()
    require(guard, principal, Operation.READ, sorted({tp.topic for tp in wanted}))
    try:
        return context.broker.fetch_committed(group_id, wanted), set()
    except PendingTransactionError:  # some are held: find which, one partition at a time
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        unstable: set[TopicPartition] = set()
        for topic_partition in wanted:
            try:
                offsets.update(context.broker.fetch_committed(group_id, [topic_partition]))
            except PendingTransactionError:
                offsets[topic_partition] = _NONE_COMMITTED
                unstable.add(topic_partition)
        return offsets, unstable


def _wanted(topics: list[Any] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [
        TopicPartition(topic.name, index) for topic in topics for index in topic.partition_indexes
    ]


def _by_topic(
    offsets: dict[TopicPartition, OffsetAndMetadata],
) -> dict[str, dict[int, OffsetAndMetadata]]:
    grouped: dict[str, dict[int, OffsetAndMetadata]] = {}
    for topic_partition, committed in sorted(offsets.items()):
        grouped.setdefault(topic_partition.topic, {})[topic_partition.partition] = committed
    return grouped


def handle_offset_fetch(
    request: OffsetFetchRequest, version: int, context: KafkaContext
) -> OffsetFetchResponse:
    if version >= GROUPS_ARRAY_VERSION:
        groups = [_group_answer(context, group, version) for group in request.groups]
        return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)
    Topic = OffsetFetchResponse.OffsetFetchResponseTopic
    Partition = Topic.OffsetFetchResponsePartition
    unstable: set[TopicPartition] = set()
    try:
        offsets, unstable = _committed(context, request.group_id, _wanted(request.topics))
        error_code = NONE
    except TwinlogError as error:
        offsets, error_code = {}, code_of(error, OffsetFetchRequest.API_KEY)
        if request.topics is not None:
            offsets = dict.fromkeys(_wanted(request.topics) or [], _NONE_COMMITTED)
    topics = _topic_answers(Topic, Partition, offsets, error_code, unstable)
    return OffsetFetchResponse(
        version=version, throttle_time_ms=0, topics=topics, error_code=error_code
    )


def fetching_member_code(context: KafkaContext, group: Any, version: int) -> int:
    """NONE, or why a KIP-848 member may not fetch the group's offsets (v9+, as Kafka's
    ConsumerGroup.validateOffsetFetch): UNKNOWN_MEMBER_ID for a member the group does not
    have, STALE_MEMBER_EPOCH for an epoch that is not its own. A fetch naming no member
    (a tool, a classic consumer) is not checked."""
    if version < MEMBER_EPOCH_VERSION or (not group.member_id and group.member_epoch < 0):
        return NONE
    description = context.broker.describe_group(group.group_id)
    if description.group_type != PROTOCOL_CONSUMER:
        return NONE  # a classic group's fetch carries no member (Kafka ignores it there)
    epochs = {member.member_id: member.member_epoch for member in description.members}
    if group.member_id not in epochs:
        return UNKNOWN_MEMBER_ID
    return NONE if epochs[group.member_id] == group.member_epoch else STALE_MEMBER_EPOCH


def _group_answer(context: KafkaContext, group: Any, version: int) -> Any:
    Group = OffsetFetchResponse.OffsetFetchResponseGroup
    Topic = Group.OffsetFetchResponseTopics
    Partition = Topic.OffsetFetchResponsePartitions
    try:
        refused = fetching_member_code(context, group, version)
        if refused:
            return Group(group_id=group.group_id, topics=[], error_code=refused)
        offsets, unstable = _committed(context, group.group_id, _wanted(group.topics))
    except TwinlogError as error:
        return Group(
            group_id=group.group_id,
            topics=[],
            error_code=code_of(error, OffsetFetchRequest.API_KEY),
        )
    topics = _topic_answers(Topic, Partition, offsets, NONE, unstable)
    return Group(group_id=group.group_id, topics=topics, error_code=NONE)


def _topic_answers(
    topic_class: Any,
    partition_class: Any,
    offsets: dict[TopicPartition, OffsetAndMetadata],
    error_code: int,
    unstable: set[TopicPartition],
) -> list[Any]:
    """OffsetFetch's per-topic answers, in the message classes of the version answered
    (the topics of v0-7, or of a group from v8); ``unstable`` partitions answered
    UNSTABLE_OFFSET_COMMIT."""
    return [
        topic_class(
            name=name,
            partitions=[
                partition_class(
                    partition_index=index,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    metadata=committed.metadata,
                    error_code=(
                        UNSTABLE_OFFSET_COMMIT
                        if TopicPartition(name, index) in unstable
                        else error_code
                    ),
                )
                for index, committed in partitions.items()
            ],
        )
        for name, partitions in _by_topic(offsets).items()
    ]
