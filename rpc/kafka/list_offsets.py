"""ListOffsets: earliest, latest (the high watermark: logs hold committed data only, so the
last stable offset is the same) or the first offset at or after a timestamp.

For a timestamp the answer's ``timestamp`` is -1: the broker returns the offset only.
MAX_TIMESTAMP (-3) and other special values but EARLIEST_LOCAL (-4, the earliest: there
is no tiered storage) get INVALID_REQUEST for that partition.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.context import LEADER_EPOCH, KafkaContext
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE
from twinlog.rpc.policy.auth import Operation

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
NOT_FOUND = -1
NO_LEADER_EPOCH = -1

TopicAnswer = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionAnswer = TopicAnswer.ListOffsetsPartitionResponse


def _partition(context: KafkaContext, topic: str, partition: int, timestamp: int) -> Any:
    broker = context.broker
    offset = NOT_FOUND
    try:
        if timestamp == LATEST_TIMESTAMP:
            offset = broker.list_offset(topic, partition, "latest")
        elif timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            offset = broker.list_offset(topic, partition, "earliest")
        elif timestamp >= 0:
            found = broker.list_offset(topic, partition, timestamp)
            # The broker answers the high watermark when no record is that recent; Kafka's
            # answer for that is offset -1.
            offset = found if found < broker.list_offset(topic, partition, "latest") else NOT_FOUND
        else:
            return PartitionAnswer(partition_index=partition, error_code=INVALID_REQUEST)
    except TwinlogError as error:
        code = context.partition_code(error, ListOffsetsRequest.API_KEY, topic, partition)
        return PartitionAnswer(partition_index=partition, error_code=code)
    return PartitionAnswer(
        partition_index=partition,
        error_code=NONE,
        timestamp=-1,
        offset=offset,
        # a cluster's leader epoch is in Metadata; this answer does not repeat it
        leader_epoch=LEADER_EPOCH if context.cluster is None else NO_LEADER_EPOCH,
    )


def handle_list_offsets(
    request: ListOffsetsRequest, version: int, context: KafkaContext
) -> ListOffsetsResponse:
    topics = []
    for topic in request.topics:
        denied = authorize(
            context.guard, context.connection.principal, Operation.READ, (topic.name,)
        )
        partitions = [
            PartitionAnswer(partition_index=item.partition_index, error_code=denied)
            if denied
            else _partition(context, topic.name, item.partition_index, item.timestamp)
            for item in topic.partitions
        ]
        topics.append(TopicAnswer(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
