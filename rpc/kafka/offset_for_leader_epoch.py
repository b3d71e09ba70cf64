"""OffsetForLeaderEpoch (KIP-101, KIP-320): a consumer checks its position at a new leader.

A consumer whose position was read under leader epoch E asks, once Metadata names a newer
epoch, where E ends in the leader's log: for each partition the leader answers the largest
epoch of its log <= E and the offset after that epoch's last record (the high watermark
for the latest epoch; never above it: consumers read below it only), from the data log's
leader-epoch checkpoint, the one the replication between brokers reads. A position past
that end was truncated away; twinlog's logs hold committed records only, so a consumer's
position is never found so (the answer says the epoch ended at or after it).

Per partition, as Kafka's broker answers:

- ``current_leader_epoch`` (v2+; -1: not checked) older than the partition's is
  FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (the client refreshes its metadata);
- a broker that does not lead the partition says NOT_LEADER_OR_FOLLOWER (or
  LEADER_NOT_AVAILABLE), a missing one UNKNOWN_TOPIC_OR_PARTITION;
- an epoch older than every epoch the log knows: epoch -1, end offset -1;
- the caller needs to see the topic (DESCRIBE, which READ, WRITE, DELETE and ALTER
  imply), else TOPIC_AUTHORIZATION_FAILED.

A request naming a replica (``replica_id`` >= 0, v3+) is a follower's, which Kafka
authorizes with CLUSTER_ACTION: no Kafka client is one (twinlog's replicas fetch over
their own door), so it is answered CLUSTER_AUTHORIZATION_FAILED on every partition.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    AUTHORIZATION_FAILED_CODES,
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
)
from twinlog.rpc.kafka.metadata import visible

TopicAnswer = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
PartitionAnswer = TopicAnswer.EpochEndOffset
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET
CONSUMER_REPLICA_ID = -1
CLUSTER_AUTHORIZATION_FAILED = AUTHORIZATION_FAILED_CODES["cluster"]


def _refused(partition: int, code: int) -> Any:
    return PartitionAnswer(
        error_code=code, partition=partition, leader_epoch=UNDEFINED, end_offset=UNDEFINED
    )


def _partition(context: KafkaContext, topic: str, request: Any) -> Any:
    partition = request.partition
    try:
        found = context.broker.end_offset_for_leader_epoch(
            topic, partition, request.leader_epoch, request.current_leader_epoch
        )
    except TwinlogError as error:
        code = context.partition_code(error, OffsetForLeaderEpochRequest.API_KEY, topic, partition)
        return _refused(partition, code)
    return PartitionAnswer(
        error_code=NONE,
        partition=partition,
        leader_epoch=found.epoch,
        end_offset=found.end_offset,
    )


def handle_offset_for_leader_epoch(
    request: OffsetForLeaderEpochRequest, version: int, context: KafkaContext
) -> OffsetForLeaderEpochResponse:
    from_replica = request.replica_id >= 0
    topics = []
    for topic in request.topics:
        code = NONE
        if from_replica:
            code = CLUSTER_AUTHORIZATION_FAILED
        elif not visible(context, topic.topic):
            code = TOPIC_AUTHORIZATION_FAILED
        partitions = [
            _refused(item.partition, code) if code else _partition(context, topic.topic, item)
            for item in topic.partitions
        ]
        topics.append(TopicAnswer(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=topics)
