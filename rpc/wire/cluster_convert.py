"""``ClusterMetadata`` <-> ``twinlog.v1.MetadataResponse``, both directions; and the
FindCoordinator call's key types and answer.

The one place the Metadata and FindCoordinator calls' fields are named: the server
answers with ``metadata_to_proto`` (``coordinator_to_proto``), the client reads with
``metadata_from_proto`` (``coordinator_from_proto``), and a round trip gives back an
equal value (tests/rpc/wire, tests/rpc/client/test_find_coordinator.py).
"""

from __future__ import annotations

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.generated.twinlog.v1 import admin_pb2
from twinlog.rpc.wire.broker_api import CoordinatorKeyType, FoundCoordinator

KEY_TYPE_TO_PROTO: dict[CoordinatorKeyType, admin_pb2.CoordinatorKeyType] = {
    CoordinatorKeyType.TRANSACTION: admin_pb2.COORDINATOR_KEY_TYPE_TRANSACTION,
    CoordinatorKeyType.PRODUCER_ID: admin_pb2.COORDINATOR_KEY_TYPE_PRODUCER_ID,
    CoordinatorKeyType.GROUP: admin_pb2.COORDINATOR_KEY_TYPE_GROUP,
}
KEY_TYPE_FROM_PROTO = {value: key for key, value in KEY_TYPE_TO_PROTO.items()}


def endpoint_to_proto(broker: BrokerEndpoint) -> admin_pb2.BrokerEndpoint:
    return admin_pb2.BrokerEndpoint(
        broker_id=broker.broker_id,
        host=broker.host,
        port=broker.port,
        kafka_host=broker.kafka_host,
        kafka_port=broker.kafka_port,
    )


def endpoint_from_proto(message: admin_pb2.BrokerEndpoint) -> BrokerEndpoint:
    return BrokerEndpoint(
        message.broker_id, message.host, message.port, message.kafka_host, message.kafka_port
    )


def metadata_to_proto(metadata: ClusterMetadata) -> admin_pb2.MetadataResponse:
    response = admin_pb2.MetadataResponse(
        controller_id=metadata.controller_id,
        brokers=[endpoint_to_proto(item) for item in metadata.brokers],
        topics=[
            admin_pb2.TopicMetadata(
                name=topic.name,
                partitions=[
                    admin_pb2.PartitionMetadata(
                        partition=item.partition,
                        leader_id=item.leader_id,
                        leader_epoch=item.leader_epoch,
                        replicas=list(item.replicas),
                        isr=list(item.isr),
                    )
                    for item in topic.partitions
                ],
            )
            for topic in metadata.topics
        ],
    )
    if metadata.cluster_id is not None:
        response.cluster_id = metadata.cluster_id
    return response


def metadata_from_proto(response: admin_pb2.MetadataResponse) -> ClusterMetadata:
    return ClusterMetadata(
        cluster_id=response.cluster_id if response.HasField("cluster_id") else None,
        controller_id=response.controller_id,
        brokers=tuple(endpoint_from_proto(item) for item in response.brokers),
        topics=tuple(
            TopicMetadata(
                topic.name,
                tuple(
                    PartitionMetadata(
                        item.partition,
                        item.leader_id,
                        item.leader_epoch,
                        tuple(item.replicas),
                        tuple(item.isr),
                    )
                    for item in topic.partitions
                ),
            )
            for topic in response.topics
        ),
    )


def key_type_from_proto(value: admin_pb2.CoordinatorKeyType) -> CoordinatorKeyType:
    """The key type a request names; unspecified or unknown (a newer client's) is refused."""
    found = KEY_TYPE_FROM_PROTO.get(value)
    if found is None:
        raise InvalidConfigError(
            f"FindCoordinator key_type {value} is not TRANSACTION, PRODUCER_ID or GROUP"
        )
    return found


def coordinator_to_proto(found: FoundCoordinator) -> admin_pb2.FindCoordinatorResponse:
    broker = found.broker
    return admin_pb2.FindCoordinatorResponse(
        coordinator_partition=found.coordinator_partition,
        coordinator=endpoint_to_proto(broker),
    )


def coordinator_from_proto(response: admin_pb2.FindCoordinatorResponse) -> FoundCoordinator:
    return FoundCoordinator(
        response.coordinator_partition, endpoint_from_proto(response.coordinator)
    )
