"""``ClusterMetadata`` <-> ``twinlog.v1.MetadataResponse``, both directions.

The one place the Metadata call's fields are named: the server answers with
``metadata_to_proto``, the client reads with ``metadata_from_proto``, and a round trip
gives back an equal value (tests/rpc/wire).
"""

from __future__ import annotations

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.rpc.generated.twinlog.v1 import admin_pb2


def metadata_to_proto(metadata: ClusterMetadata) -> admin_pb2.MetadataResponse:
    response = admin_pb2.MetadataResponse(
        controller_id=metadata.controller_id,
        brokers=[
            admin_pb2.BrokerEndpoint(broker_id=item.broker_id, host=item.host, port=item.port)
            for item in metadata.brokers
        ],
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
        brokers=tuple(
            BrokerEndpoint(item.broker_id, item.host, item.port) for item in response.brokers
        ),
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
