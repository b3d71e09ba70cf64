"""Metadata: a single node's listener is the one broker, leader of every partition at
epoch 0; a cluster broker's lists every live broker with a Kafka listener and each
partition's leader, leader epoch, replicas and ISR as the cluster's ZooKeeper holds them
(``cluster``), the same answer from whichever broker a client asks.

A partition without a live leader is answered LEADER_NOT_AVAILABLE (leader -1), one led by
a broker without a Kafka listener LISTENER_NOT_FOUND; replicas not registered are listed
offline. Clients retry those and refresh their metadata.

Each partition's leader epoch is answered as it is: a single node's is its log's (0
unless its data came from a cluster), a cluster's the partition state's in ZooKeeper. A
client that sees a newer epoch than its position's checks the position at the new leader
with OffsetForLeaderEpoch (KIP-320, ``offset_for_leader_epoch``) before fetching again, and
sends the epoch it knows in Fetch and ListOffsets, which check it (FENCED_LEADER_EPOCH,
UNKNOWN_LEADER_EPOCH).

A topic the request names that does not exist is created when the request allows it
(``allow_auto_topic_creation``: a producer's, and any request before version 4, as Kafka
reads them) and the broker's ``auto.create.topics.enable`` is on, with ``num.partitions``
partitions and the default replication factor, as Kafka's broker does: the caller needs
CREATE on it (else TOPIC_AUTHORIZATION_FAILED, nothing created, an audit line), and the
creation is audited as the CreateTopics door's. The answer names the new topic as a
single node has it at once; a cluster's answers LEADER_NOT_AVAILABLE, as Kafka's, while
the controller gives its partitions leaders (the client asks again). Another broker or
client creating it meanwhile is no error. Internal topics (``__*``) are never created so;
otherwise a missing topic is UNKNOWN_TOPIC_OR_PARTITION, a name no topic may have
INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from twinlog.engine.base.cluster_metadata import NO_CONTROLLER, NO_LEADER, ClusterMetadata
from twinlog.engine.base.errors import (
    InvalidConfigError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicDescription
from twinlog.engine.broker.internal_topics import is_internal
from twinlog.engine.broker.topic_registry import validate_topic_name
from twinlog.rpc.kafka.access import ResourceDenied
from twinlog.rpc.kafka.authorized_operations import authorized_operations
from twinlog.rpc.kafka.context import LEADER_EPOCH, NODE_ID, KafkaContext
from twinlog.rpc.kafka.error_codes import (
    INVALID_TOPIC_EXCEPTION,
    LEADER_NOT_AVAILABLE,
    LISTENER_NOT_FOUND,
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    code_of,
)
from twinlog.rpc.policy.auth import CLUSTER_NAME, Resource
from twinlog.rpc.policy.topic_auto_creation import auto_creation

Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker
NO_TOPIC_ID = uuid.UUID(int=0)
# The cluster's partition states, or the refusal of reading them (ZooKeeper away)
ClusterRead = ClusterMetadata | TwinlogError


def topic_uuid(topic_id: str) -> uuid.UUID:
    """twinlog's 32 hex digits as the UUID Kafka's clients expect (zero when none)."""
    return uuid.UUID(hex=topic_id) if topic_id else NO_TOPIC_ID


# Topic names by Kafka topic id, as last seen (any broker of this process: ids are unique);
# each hit is checked against the topic as it is now, so a stale entry is never used.
_names_by_id: dict[uuid.UUID, str] = {}


def name_of_topic_id(context: KafkaContext, topic_id: uuid.UUID) -> str | None:
    """The name of the topic whose id is ``topic_id`` (Fetch 13+, DeleteTopics 6), None
    when no topic has it. A miss walks the topics once."""
    if topic_id == NO_TOPIC_ID:
        return None
    name = _names_by_id.get(topic_id)
    if name is not None and _id_of(context, name) == topic_id:
        return name
    for candidate in context.broker.list_topics():
        found = _id_of(context, candidate)
        if found is not None:
            _names_by_id[found] = candidate
    name = _names_by_id.get(topic_id)
    return name if name is not None and _id_of(context, name) == topic_id else None


def _id_of(context: KafkaContext, name: str) -> uuid.UUID | None:
    try:
        return topic_uuid(context.broker.describe_topic(name).topic_id)
    except TwinlogError:  # deleted meanwhile
        return None


def visible(context: KafkaContext, name: str) -> bool:
    """Listed to callers that may describe it (as Kafka: read, write, delete and alter
    imply it)."""
    return context.guard.may_describe(context.connection.principal, name, Resource.TOPIC)


def _single_node_partition(context: KafkaContext, topic: str, partition: int) -> Any:
    try:
        leader_epoch = context.broker.client_leader_epoch(topic, partition)
    except TwinlogError:  # deleted meanwhile: the next request says so
        leader_epoch = LEADER_EPOCH
    return Partition(
        error_code=NONE,
        partition_index=partition,
        leader_id=NODE_ID,
        leader_epoch=leader_epoch,
        replica_nodes=[NODE_ID],
        isr_nodes=[NODE_ID],
        offline_replicas=[],
    )


def _cluster_partition(cluster: ClusterMetadata, topic: str, partition: int) -> Any:
    found = cluster.partition(topic, partition)
    if found is None:  # created a moment ago: its state is not written yet
        return Partition(
            error_code=LEADER_NOT_AVAILABLE,
            partition_index=partition,
            leader_id=NO_LEADER,
            leader_epoch=-1,
            replica_nodes=[],
            isr_nodes=[],
            offline_replicas=[],
        )
    leader = cluster.leader(topic, partition)
    error_code, leader_id = NONE, found.leader_id
    if leader is None:
        error_code, leader_id = LEADER_NOT_AVAILABLE, NO_LEADER
    elif leader.kafka_address is None:
        error_code, leader_id = LISTENER_NOT_FOUND, NO_LEADER
    return Partition(
        error_code=error_code,
        partition_index=partition,
        leader_id=leader_id,
        leader_epoch=found.leader_epoch,
        replica_nodes=list(found.replicas),
        isr_nodes=list(found.isr),
        offline_replicas=[item for item in found.replicas if cluster.broker(item) is None],
    )


def _error(code: int, name: str) -> Any:
    return Topic(error_code=code, name=name, topic_id=NO_TOPIC_ID, partitions=[])


def _auto_created(context: KafkaContext, name: str) -> Any:
    """The answer for ``name``, which did not exist: created first if the broker's setting
    and the caller's CREATE allow (see the module's text), else why not."""
    connection = context.connection
    creating = auto_creation(
        context.guard,
        connection.principal,
        name,
        refused=lambda message: ResourceDenied(message, Resource.TOPIC),
        peer=connection.peer,
        door="kafka",
    )
    try:
        description = context.broker.auto_create_topic(name, creating)
    except InvalidConfigError:  # a name no topic may have
        return _error(INVALID_TOPIC_EXCEPTION, name)
    except TwinlogError as error:
        return _error(code_of(error), name)
    if context.cluster is not None:  # the controller gives its partitions leaders
        return _error(LEADER_NOT_AVAILABLE, name)
    return _described(context, name, description, None)


def _topic(
    context: KafkaContext, name: str, cluster: ClusterRead | None, auto_create: bool = False
) -> Any:
    if not visible(context, name):
        return _error(TOPIC_AUTHORIZATION_FAILED, name)
    try:
        description = context.broker.describe_topic(name)
        if isinstance(cluster, TwinlogError):
            raise cluster
    except UnknownTopicOrPartitionError:
        if auto_create:
            return _auto_created(context, name)
        return _error(_missing_code(name), name)
    except InvalidConfigError:  # a name no topic may have
        return _error(INVALID_TOPIC_EXCEPTION, name)
    except TwinlogError as error:
        return _error(code_of(error), name)
    return _described(context, name, description, cluster)


def _topic_by_id(
    context: KafkaContext, topic_id: uuid.UUID, name: str | None, cluster: ClusterRead | None
) -> Any:
    """A topic asked for by id, as Kafka answers it: UNKNOWN_TOPIC_ID when no topic has the
    id, TOPIC_AUTHORIZATION_FAILED without its name when the caller may not see it."""
    if name is None:
        code = UNKNOWN_TOPIC_ID
    elif not visible(context, name):
        code = TOPIC_AUTHORIZATION_FAILED
    else:
        return _topic(context, name, cluster)
    return Topic(error_code=code, name=None, topic_id=topic_id, partitions=[])


def _missing_code(name: str) -> int:
    """A topic that does not exist: a name no topic may have is said so, as Kafka's."""
    try:
        validate_topic_name(name)
    except InvalidConfigError:
        return INVALID_TOPIC_EXCEPTION
    return UNKNOWN_TOPIC_OR_PARTITION


def _described(
    context: KafkaContext, name: str, description: TopicDescription, cluster: ClusterRead | None
) -> Any:
    if cluster is None:
        partitions = [
            _single_node_partition(context, name, item.partition) for item in description.partitions
        ]
    else:
        assert isinstance(cluster, ClusterMetadata)
        partitions = [
            _cluster_partition(cluster, name, item.partition) for item in description.partitions
        ]
    return Topic(
        error_code=0,
        name=name,
        topic_id=topic_uuid(description.topic_id),
        is_internal=is_internal(name),
        partitions=partitions,
    )


def read_cluster(context: KafkaContext, names: list[str]) -> ClusterRead | None:
    """The cluster's state of ``names`` (None on a single node), read once per request."""
    if context.cluster is None:
        return None
    try:
        return context.cluster.metadata(names or None)
    except TwinlogError as error:
        return error


def brokers_of(context: KafkaContext, cluster: ClusterRead | None) -> list[Any]:
    """Every live broker with a Kafka listener; this one alone on a single node, or when
    the cluster's state could not be read."""
    if cluster is None or isinstance(cluster, TwinlogError):
        host, port = context.endpoint()
        node_id = NODE_ID if context.cluster is None else context.cluster.broker_id
        return [Broker(node_id=node_id, host=host, port=port)]
    found = []
    for item in cluster.brokers:
        address = item.kafka_address
        if address is not None:
            found.append(Broker(node_id=item.broker_id, host=address[0], port=address[1]))
    return found


def identity_of(context: KafkaContext, cluster: ClusterRead | None) -> tuple[str, int]:
    """(cluster id, controller id): this node itself on a single node; ZooKeeper's word on
    a cluster (no controller: -1)."""
    controller_id = NODE_ID
    cluster_id = context.broker.cluster_id  # random per cluster: tools key by it
    if context.cluster is not None:
        read = cluster if isinstance(cluster, ClusterMetadata) else None
        controller_id = read.controller_id if read is not None else NO_CONTROLLER
        cluster_id = (read.cluster_id if read is not None else None) or cluster_id
    return cluster_id, controller_id


def handle_metadata(
    request: MetadataRequest, version: int, context: KafkaContext
) -> MetadataResponse:
    requested = request.topics
    topics: list[Any] = []
    if requested is None or (version == 0 and not requested):  # v0: an empty list is all
        names = [name for name in context.broker.list_topics() if visible(context, name)]
        cluster = read_cluster(context, names)
        topics = [_topic(context, name, cluster) for name in names]
    else:
        # by topic id only (v10+: a KIP-848 consumer learns its assignment's topics so)
        by_id = {
            wanted.topic_id: name_of_topic_id(context, wanted.topic_id)
            for wanted in requested
            if wanted.name is None
        }
        cluster = read_cluster(
            context,
            [wanted.name for wanted in requested if wanted.name is not None]
            + [name for name in by_id.values() if name is not None],
        )
        for wanted in requested:
            if wanted.name is None:
                topics.append(
                    _topic_by_id(context, wanted.topic_id, by_id[wanted.topic_id], cluster)
                )
            else:
                topics.append(
                    _topic(context, wanted.name, cluster, request.allow_auto_topic_creation)
                )
    if getattr(request, "include_topic_authorized_operations", False):  # v8+
        for topic in topics:
            if topic.error_code == 0:
                topic.authorized_operations = authorized_operations(
                    context, Resource.TOPIC, topic.name
                )
    cluster_id, controller_id = identity_of(context, cluster)
    return MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=brokers_of(context, cluster),
        cluster_id=cluster_id,
        controller_id=controller_id,
        topics=topics,
        authorized_operations=authorized_operations(  # v8-10
            context,
            Resource.CLUSTER,
            CLUSTER_NAME,
            bool(getattr(request, "include_cluster_authorized_operations", False)),
        ),
    )
