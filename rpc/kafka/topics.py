"""CreateTopics and DeleteTopics, onto the broker's ``create_topic`` and ``delete_topic``
(with CREATE and DELETE on the topic, as ``twinlog topics create|delete`` need).

A single node holds one replica of each partition: a replication factor other than 1 (or
-1, the default) is refused INVALID_REPLICATION_FACTOR. A cluster broker passes the factor
on as the topic's ``replication.factor`` (-1: the cluster's ``default_replication_factor``),
and the broker checks it. Explicit replica assignments are refused INVALID_REQUEST (a
cluster's controller places replicas). ``validate_only`` checks the grant, the name and
(on a single node) the replication factor, and creates nothing. Topic settings are the
broker's topic config keys (the broker refuses an unknown key or a bad value: INVALID_CONFIG,
naming it, as Kafka answers).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.base.types import REPLICATION_FACTOR_SETTING
from twinlog.rpc.kafka.access import require
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import (
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    NONE,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_ID,
    code_of,
)
from twinlog.rpc.kafka.metadata import NO_TOPIC_ID, name_of_topic_id, topic_uuid
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import Operation

DEFAULT = -1  # Kafka's "the broker's default" for partitions and replication factor
REPLICAS = 1  # a single node
PARTITIONS_DEFAULT = 1
TOPIC_IDS_VERSION = 6  # DeleteTopics names topics by name or id from this version

Created = CreateTopicsResponse.CreatableTopicResult
Deleted = DeleteTopicsResponse.DeletableTopicResult


def audited_change(
    context: KafkaContext, event: str, **fields: Any
) -> AbstractContextManager[None]:
    """The audit log's line for a topic change through this door (as the gRPC door's)."""
    connection = context.connection
    return audited(
        event, principal=connection.principal.name, peer=connection.peer, door="kafka", **fields
    )


def _create(context: KafkaContext, topic: Any, validate_only: bool) -> Any:
    name = topic.name
    partitions = PARTITIONS_DEFAULT if topic.num_partitions == DEFAULT else topic.num_partitions
    clustered = context.cluster is not None
    factor = topic.replication_factor if clustered else REPLICAS
    if not clustered and topic.replication_factor not in (DEFAULT, REPLICAS):
        return Created(
            name=name,
            error_code=INVALID_REPLICATION_FACTOR,
            error_message=f"replication factor {topic.replication_factor}: this broker is a "
            "single node and keeps 1 replica",
        )
    if topic.assignments:
        return Created(
            name=name,
            error_code=INVALID_REQUEST,
            error_message="replica assignments are not taken (a single node holds every replica; "
            "a cluster's controller places them)",
        )
    config = {item.name: item.value for item in topic.configs if item.value is not None}
    if clustered and factor != DEFAULT:
        config[REPLICATION_FACTOR_SETTING] = str(factor)
    try:
        require(context.guard, context.connection.principal, Operation.CREATE, (name,))
        if validate_only:
            if name in context.broker.list_topics():
                return Created(name=name, error_code=TOPIC_ALREADY_EXISTS, error_message=None)
            return Created(
                name=name,
                error_code=NONE,
                num_partitions=partitions,
                replication_factor=factor,
                configs=None,
            )
        with audited_change(context, "topic.create", topic=name, partitions=partitions):
            description = context.broker.create_topic(name, partitions, config or None)
    except TwinlogError as error:
        return Created(
            name=name,
            error_code=code_of(error, CreateTopicsRequest.API_KEY),
            error_message=str(error),
        )
    return Created(
        name=name,
        topic_id=topic_uuid(description.topic_id),
        error_code=NONE,
        error_message=None,
        num_partitions=len(description.partitions),
        replication_factor=factor,
        configs=None,
    )


def handle_create_topics(
    request: CreateTopicsRequest, version: int, context: KafkaContext
) -> CreateTopicsResponse:
    topics = [_create(context, topic, request.validate_only) for topic in request.topics]
    return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=topics)


def handle_delete_topics(
    request: DeleteTopicsRequest, version: int, context: KafkaContext
) -> DeleteTopicsResponse:
    """Versions 1-5 name topics by name; 6 (Kafka 2.8 on) by name or topic id."""
    if version < TOPIC_IDS_VERSION:
        wanted = [(name, NO_TOPIC_ID) for name in request.topic_names]
    else:
        wanted = [(state.name, state.topic_id or NO_TOPIC_ID) for state in request.topics]
    responses = []
    for name, topic_id in wanted:
        if name is None:
            name = name_of_topic_id(context, topic_id)
            if name is None:
                responses.append(
                    Deleted(
                        name=None,
                        topic_id=topic_id,
                        error_code=UNKNOWN_TOPIC_ID,
                        error_message=f"no topic has id {topic_id}",
                    )
                )
                continue
        try:
            require(context.guard, context.connection.principal, Operation.DELETE, (name,))
            with audited_change(context, "topic.delete", topic=name):
                context.broker.delete_topic(name)
            responses.append(
                Deleted(name=name, topic_id=topic_id, error_code=NONE, error_message=None)
            )
        except TwinlogError as error:
            responses.append(
                Deleted(
                    name=name,
                    topic_id=topic_id,
                    error_code=code_of(error, DeleteTopicsRequest.API_KEY),
                    error_message=str(error),
                )
            )
    return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=responses)
