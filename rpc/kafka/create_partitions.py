"""CreatePartitions, onto the broker's ``create_partitions`` (ALTER on the topic, as Kafka
asks and as ``twinlog topics alter --partitions`` needs): a topic grows to ``count``
partitions in all, never shrinks (INVALID_PARTITIONS). Explicit replica assignments are
refused INVALID_REQUEST (a cluster's controller places the new replicas, as a new topic's).
``validate_only`` checks the grant and the count, and changes nothing.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, NONE, code_of
from twinlog.rpc.kafka.topics import audited_change
from twinlog.rpc.policy.auth import Operation

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def handle_create_partitions(
    request: CreatePartitionsRequest, version: int, context: KafkaContext
) -> CreatePartitionsResponse:
    results = [_grow(context, topic, request.validate_only) for topic in request.topics]
    return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)


def _grow(context: KafkaContext, topic: Any, validate_only: bool) -> Any:
    name = topic.name
    if topic.assignments:
        return Result(
            name=name,
            error_code=INVALID_REQUEST,
            error_message="twinlog's controller places the new partitions' replicas: send no "
            "assignments",
        )
    try:
        require(context.guard, context.connection.principal, Operation.ALTER, (name,))
        if validate_only:
            context.broker.create_partitions(name, topic.count, validate_only=True)
        else:
            with audited_change(context, "topic.alter", topic=name, partitions=topic.count):
                context.broker.create_partitions(name, topic.count)
    except TwinlogError as error:
        return Result(
            name=name,
            error_code=code_of(error, CreatePartitionsRequest.API_KEY),
            error_message=str(error),
        )
    return Result(name=name, error_code=NONE, error_message=None)
