"""Metadata: this listener as the one broker, leader of every partition at epoch 0.

Topics are never created by a Metadata request (twinlog creates topics only on purpose:
``twinlog topics create``); an unknown one is answered UNKNOWN_TOPIC_OR_PARTITION, as a
Kafka broker with ``auto.create.topics.enable=false`` does.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from twinlog.engine.base.errors import TwinlogError
from twinlog.engine.broker.internal_topics import is_internal
from twinlog.rpc.kafka.access import may
from twinlog.rpc.kafka.context import LEADER_EPOCH, NODE_ID, KafkaContext
from twinlog.rpc.kafka.error_codes import (
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
    code_of,
)
from twinlog.rpc.server.auth import Operation, Resource

Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
NO_TOPIC_ID = uuid.UUID(int=0)
# One id for a cluster of one: clients only compare it between answers.
CLUSTER_ID = "twinlog"


def topic_uuid(topic_id: str) -> uuid.UUID:
    """twinlog's 32 hex digits as the UUID Kafka's clients expect (zero when none)."""
    return uuid.UUID(hex=topic_id) if topic_id else NO_TOPIC_ID


def _visible(context: KafkaContext, name: str) -> bool:
    """Listed to callers that may read or write it (twinlog's ACLs have no DESCRIBE on
    topics)."""
    guard, principal = context.guard, context.connection.principal
    return any(
        may(guard, principal, operation, name, Resource.TOPIC)
        for operation in (Operation.READ, Operation.WRITE)
    )


def _topic(context: KafkaContext, name: str) -> Any:
    if not _visible(context, name):
        return Topic(
            error_code=TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=NO_TOPIC_ID, partitions=[]
        )
    try:
        description = context.broker.describe_topic(name)
    except TwinlogError as error:
        return Topic(error_code=code_of(error), name=name, topic_id=NO_TOPIC_ID, partitions=[])
    partitions = [
        Partition(
            error_code=0,
            partition_index=item.partition,
            leader_id=NODE_ID,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=[NODE_ID],
            isr_nodes=[NODE_ID],
            offline_replicas=[],
        )
        for item in description.partitions
    ]
    return Topic(
        error_code=0,
        name=name,
        topic_id=topic_uuid(description.topic_id),
        is_internal=is_internal(name),
        partitions=partitions,
    )


def handle_metadata(
    request: MetadataRequest, version: int, context: KafkaContext
) -> MetadataResponse:
    host, port = context.endpoint()
    requested = request.topics
    topics: list[Any] = []
    if requested is None or (version == 0 and not requested):  # v0: an empty list is all
        names = context.broker.list_topics()
        topics = [_topic(context, name) for name in names if _visible(context, name)]
    else:
        for wanted in requested:
            if wanted.name is None:  # by topic id only (v10+): ids are not looked up here
                topics.append(
                    Topic(
                        error_code=UNKNOWN_TOPIC_OR_PARTITION,
                        name=None,
                        topic_id=wanted.topic_id,
                        partitions=[],
                    )
                )
            else:
                topics.append(_topic(context, wanted.name))
    return MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host=host, port=port)],
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        topics=topics,
    )
