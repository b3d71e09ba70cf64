"""DescribeCluster (KIP-700), as Kafka's AdminClient ``describeCluster`` and librdkafka's
``describe_cluster`` ask: the cluster id, the controller and every broker with a Kafka
listener, from the same read as Metadata's (``metadata``).

Only the brokers' endpoints are described (``EndpointType`` 1); a request for the
controllers' (2, KRaft's) is answered UNSUPPORTED_ENDPOINT_TYPE. No broker is fenced (a
ZooKeeper cluster has no fencing of registered brokers). The cluster's authorized
operations are computed when asked (``authorized_operations``).
"""

from __future__ import annotations

from kafka.errors import UnsupportedEndpointTypeError
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from twinlog.rpc.kafka.authorized_operations import authorized_operations
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE
from twinlog.rpc.kafka.metadata import brokers_of, identity_of, read_cluster
from twinlog.rpc.policy.auth import CLUSTER_NAME, Resource

BROKERS_ENDPOINT = 1
UNSUPPORTED_ENDPOINT_TYPE = UnsupportedEndpointTypeError.errno

Described = DescribeClusterResponse.DescribeClusterBroker


def handle_describe_cluster(
    request: DescribeClusterRequest, version: int, context: KafkaContext
) -> DescribeClusterResponse:
    endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    cluster = read_cluster(context, [])
    cluster_id, controller_id = identity_of(context, cluster)
    fields = {
        "version": version,
        "throttle_time_ms": 0,
        "endpoint_type": endpoint_type,
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "authorized_operations": authorized_operations(
            context,
            Resource.CLUSTER,
            CLUSTER_NAME,
            bool(getattr(request, "include_cluster_authorized_operations", False)),
        ),
    }
    if endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(
            error_code=UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"endpoint type {endpoint_type}: only brokers' (1) are described",
            brokers=[],
            **fields,
        )
    brokers = [
        Described(broker_id=b.node_id, host=b.host, port=b.port, rack=None, is_fenced=False)
        for b in brokers_of(context, cluster)
    ]
    return DescribeClusterResponse(error_code=NONE, error_message=None, brokers=brokers, **fields)
