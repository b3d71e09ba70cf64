"""OffsetDelete (API key 47): delete a group's committed offsets of some partitions, as
Kafka's ``kafka-consumer-groups.sh --delete-offsets`` and ``AdminClient.
delete_consumer_group_offsets`` ask it.

As Kafka's broker: DELETE on the group (else GROUP_AUTHORIZATION_FAILED for the whole
request) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions); an
unknown group is GROUP_ID_NOT_FOUND; a partition of a topic one of the group's members
reads is GROUP_SUBSCRIBED_TO_TOPIC, and only the others' offsets are deleted
(``Broker.delete_offsets`` has the rules). The deletions are records of
``__consumer_offsets``, so they survive restarts and compaction; each request that
deletes something is audited as ``group.offsets.delete``.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.kafka.access import may, require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE, TOPIC_AUTHORIZATION_FAILED, code_of
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import Operation, Resource

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = Topic.OffsetDeleteResponsePartition


def handle_offset_delete(
    request: OffsetDeleteRequest, version: int, context: KafkaContext
) -> OffsetDeleteResponse:
    guard, principal = context.guard, context.connection.principal
    asked = [
        TopicPartition(topic.name, item.partition_index)
        for topic in request.topics
        for item in topic.partitions
    ]
    codes: dict[TopicPartition, int] = {}
    try:
        require(guard, principal, Operation.DELETE, (request.group_id,), Resource.GROUP)
        readable = {
            topic
            for topic in {p.topic for p in asked}
            if may(guard, principal, Operation.READ, topic, Resource.TOPIC)
        }
        for partition in asked:
            if partition.topic not in readable:
                codes[partition] = TOPIC_AUTHORIZATION_FAILED
        wanted = [p for p in asked if p.topic in readable]
        if wanted:
            with audited(
                "group.offsets.delete",
                principal=principal.name,
                group=request.group_id,
                partitions=",".join(map(str, wanted)),
            ):
                answers = context.broker.delete_offsets(request.group_id, wanted)
            for partition, refusal in answers.items():
                codes[partition] = (
                    NONE if refusal is None else code_of(refusal, OffsetDeleteRequest.API_KEY)
                )
    except TwinlogError as error:
        return OffsetDeleteResponse(
            version=version,
            error_code=code_of(error, OffsetDeleteRequest.API_KEY),
            throttle_time_ms=0,
            topics=[],
        )
    topics = [
        Topic(
            name=topic.name,
            partitions=[
                Partition(
                    partition_index=item.partition_index,
                    error_code=codes.get(TopicPartition(topic.name, item.partition_index), NONE),
                )
                for item in topic.partitions
            ],
        )
        for topic in request.topics
    ]
    return OffsetDeleteResponse(version=version, error_code=NONE, throttle_time_ms=0, topics=topics)
