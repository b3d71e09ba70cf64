"""ListOffsets: earliest, latest (the high watermark: logs hold committed data only, so the
last stable offset is the same) or the first record at or after a timestamp, answered
with that record's offset and timestamp (-1 and -1 when no committed record is that
recent, as Kafka answers); MAX_TIMESTAMP (-3, KIP-734) the first record holding the
largest timestamp, the same way.

Other special values but EARLIEST_LOCAL (-4, the earliest: there is no tiered storage)
get INVALID_REQUEST for that partition.

Version 0 (Kafka before 0.10.1) answers a list of offsets (``old_style_offsets``) where
later versions answer one: the same offset, alone (none when no record is found, or when
``max_num_offsets`` is 0). Kafka's v0 listed its segments' base offsets before a timestamp;
twinlog has no such segments to show, and answers the offset v1 answers.

From version 4 the answer carries a leader epoch: the leader's own for LATEST (as Kafka's),
else the epoch that wrote the record found (-1 when none is found); and each partition's
``current_leader_epoch``, unless -1, is checked: older than the partition's is
FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.access import authorize
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE
from twinlog.rpc.policy.auth import Operation

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  # KIP-734: the record with the largest timestamp
EARLIEST_LOCAL_TIMESTAMP = -4
NOT_FOUND = -1
OLD_STYLE_VERSION = 0  # a list of offsets, not one offset and its timestamp
NO_LEADER_EPOCH = -1
CURRENT_LEADER_EPOCH_VERSION = 4  # each partition names the leader epoch it expects (KIP-320)

TopicAnswer = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionAnswer = TopicAnswer.ListOffsetsPartitionResponse


def _old_style(answer: Any, wanted: int) -> Any:
    """Version 0's form of a partition's answer."""
    if answer.error_code != NONE:
        return PartitionAnswer(partition_index=answer.partition_index, error_code=answer.error_code)
    offsets = [answer.offset] if answer.offset != NOT_FOUND and wanted > 0 else []
    return PartitionAnswer(
        partition_index=answer.partition_index, error_code=NONE, old_style_offsets=offsets
    )


def _partition(
    context: KafkaContext, topic: str, partition: int, timestamp: int, expected_epoch: int
) -> Any:
    broker = context.broker
    offset = found_timestamp = NOT_FOUND
    leader_epoch = NO_LEADER_EPOCH
    try:
        # the leader only, at the epoch the client expects (when it says one)
        current_epoch = broker.client_leader_epoch(topic, partition, expected_epoch)
        if timestamp == LATEST_TIMESTAMP:
            offset = broker.list_offset(topic, partition, "latest")
        elif timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            offset = broker.list_offset(topic, partition, "earliest")
        elif timestamp >= 0 or timestamp == MAX_TIMESTAMP:
            found = (
                broker.record_for_timestamp(topic, partition, timestamp)
                if timestamp >= 0
                else broker.record_with_max_timestamp(topic, partition)
            )
            if found is not None:
                offset, found_timestamp = found
        else:
            return PartitionAnswer(partition_index=partition, error_code=INVALID_REQUEST)
        if timestamp == LATEST_TIMESTAMP:  # as Kafka: the leader's epoch
            leader_epoch = current_epoch
        elif offset != NOT_FOUND:  # the epoch that wrote the record found
            leader_epoch = broker.epoch_of_offset(topic, partition, offset)
    except TwinlogError as error:
        code = context.partition_code(error, ListOffsetsRequest.API_KEY, topic, partition)
        return PartitionAnswer(partition_index=partition, error_code=code)
    return PartitionAnswer(
        partition_index=partition,
        error_code=NONE,
        timestamp=found_timestamp,
        offset=offset,
        leader_epoch=leader_epoch,
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
            else _partition(
                context,
                topic.name,
                item.partition_index,
                item.timestamp,
                item.current_leader_epoch if version >= CURRENT_LEADER_EPOCH_VERSION else -1,
            )
            for item in topic.partitions
        ]
        if version == OLD_STYLE_VERSION:
            wanted = [item.max_num_offsets for item in topic.partitions]
            partitions = [
                _old_style(answer, n) for answer, n in zip(partitions, wanted, strict=True)
            ]
        topics.append(TopicAnswer(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
