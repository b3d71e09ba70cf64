"""DescribeCluster (KIP-700), as AdminClient.describeCluster and librdkafka ask it: the
cluster id, the controller and this broker on one node; controllers' endpoints refused."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from twinlog.rpc.kafka.describe_cluster import UNSUPPORTED_ENDPOINT_TYPE


def test_one_node_describes_itself_as_metadata_does(kafka_server: Any, raw: Any) -> None:
    answer = raw.call(
        DescribeClusterRequest(
            include_cluster_authorized_operations=False,
            endpoint_type=1,
        ),
        DescribeClusterResponse,
        1,  # Kafka 3.8's last (v2's include_fenced_brokers is 3.9's)
    )
    assert answer.error_code == 0
    assert answer.cluster_id == kafka_server.broker.cluster_id
    assert answer.controller_id == 0
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [
        (0, "127.0.0.1", kafka_server.listener.port)
    ]
    v0 = raw.call(
        DescribeClusterRequest(include_cluster_authorized_operations=True),
        DescribeClusterResponse,
        0,
    )
    assert v0.error_code == 0 and [b.broker_id for b in v0.brokers] == [0]


def test_controllers_endpoints_are_not_described(raw: Any) -> None:
    answer = raw.call(
        DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2),
        DescribeClusterResponse,
        1,
    )
    assert answer.error_code == UNSUPPORTED_ENDPOINT_TYPE and answer.brokers == []
    assert "only brokers'" in answer.error_message
