"""DeleteRecords (KIP-107): delete each partition's records below an offset, as
``kafka-delete-records.sh`` and ``AdminClient.delete_records`` ask each partition's
leader, onto the broker's ``delete_records``.

Authorised as the gRPC door's DeleteRecords: DELETE on each topic named (Kafka's rule),
checked once per topic and first, so a topic the caller may not touch answers
TOPIC_AUTHORIZATION_FAILED for each of its partitions, whether they exist or not. Per
partition, the one error table's codes: OFFSET_OUT_OF_RANGE for an offset above the high
watermark (or below -1), UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER on a broker
that does not lead it (the client asks the leader again). The low watermark is the
partition's log start after the call, -1 with an error (Kafka's). Each partition's
deletion is in the audit log (``records.delete``, ``door=kafka``).

The request's timeout_ms is not waited on: the leader answers once its own log start has
moved, and its followers take it from their next fetch answers (Kafka's leader waits
until its followers report it).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.access import ResourceDenied, require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE, code_of
from twinlog.rpc.kafka.topics import audited_change
from twinlog.rpc.policy.auth import Operation

NO_LOW_WATERMARK = -1  # the answer's low watermark with an error

Answered = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionAnswer = Answered.DeleteRecordsPartitionResult


def handle_delete_records(
    request: DeleteRecordsRequest, version: int, context: KafkaContext
) -> DeleteRecordsResponse:
    topics: list[Any] = []
    for asked in request.topics:
        denied = _denied(context, asked.name)
        partitions = [
            _partition(context, asked.name, item.partition_index, item.offset, denied)
            for item in asked.partitions
        ]
        topics.append(Answered(name=asked.name, partitions=partitions))
    return DeleteRecordsResponse(version=version, throttle_time_ms=0, topics=topics)


def _denied(context: KafkaContext, topic: str) -> ResourceDenied | None:
    """The refusal of DELETE on ``topic`` (audited once per topic named), or None."""
    try:
        require(context.guard, context.connection.principal, Operation.DELETE, (topic,))
    except ResourceDenied as denial:
        return denial
    return None


def _partition(
    context: KafkaContext, topic: str, index: int, offset: int, denied: ResourceDenied | None
) -> Any:
    if denied is not None:
        return _refused(index, code_of(denied))
    try:
        with audited_change(
            context, "records.delete", topic=topic, partition=index, before_offset=offset
        ):
            low_watermark = context.broker.delete_records(topic, index, offset)
    except TwinlogError as error:
        api_key = DeleteRecordsRequest.API_KEY
        return _refused(index, context.partition_code(error, api_key, topic, index))
    return PartitionAnswer(partition_index=index, low_watermark=low_watermark, error_code=NONE)


def _refused(index: int, code: int) -> Any:
    return PartitionAnswer(partition_index=index, low_watermark=NO_LOW_WATERMARK, error_code=code)
