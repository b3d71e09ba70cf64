"""DescribeProducers and DescribeTransactions at a cluster broker (``rpc/kafka/cluster.py``),
without ZooKeeper: an embedded broker as broker 7 of a cluster whose state a fake metadata
source holds. Broker 8 leads partition 1 of the topic, of which broker 7 has no replica,
and the odd transaction journal partitions (so it coordinates their transactional ids)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import UnknownTopicOrPartitionError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.internal_topics import (
    TXN_JOURNAL_TOPIC,
    coordinator_partition_of_transactional_id,
)
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.cluster import KafkaCluster
from twinlog.rpc.kafka.error_codes import (
    NONE,
    NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER,
    TRANSACTIONAL_ID_NOT_FOUND,
)
from twinlog.rpc.kafka.listener import KafkaListener

ME, OTHER = 7, 8
TOPIC = "described"
LEADERS = {0: ME, 1: OTHER}
REPLICAS = {0: (ME, OTHER), 1: (OTHER,)}


def _journal_leader(partition: int) -> int:
    return OTHER if partition % 2 else ME


class FakeClusterView:
    def __init__(self, kafka_port: int, journal_partitions: int) -> None:
        self.kafka_port = kafka_port
        self.journal_partitions = journal_partitions

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        journal = tuple(
            PartitionMetadata(n, _journal_leader(n), 1, (_journal_leader(n),), ())
            for n in range(self.journal_partitions)
        )
        partitions = tuple(
            PartitionMetadata(n, leader, 1, REPLICAS[n], REPLICAS[n])
            for n, leader in LEADERS.items()
        )
        return ClusterMetadata(
            cluster_id="c0ffee",
            controller_id=OTHER,
            brokers=(
                BrokerEndpoint(ME, "127.0.0.1", 7070, "127.0.0.1", self.kafka_port),
                BrokerEndpoint(OTHER, "b8", 7071, "b8", 9098),
            ),
            topics=(TopicMetadata(TOPIC, partitions), TopicMetadata(TXN_JOURNAL_TOPIC, journal)),
        )


class ClusterBroker:
    """The embedded broker, holding no replica of what the cluster says it has none of."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    def describe_producers(self, topic: str, partition: int) -> Any:
        if topic == TOPIC and ME not in REPLICAS[partition]:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}: no replica here")
        return self._broker.describe_producers(topic, partition)


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """This module's listener, for the ``raw`` connections of ``conftest.py``."""
    broker = Broker.open(tmp_path_factory.mktemp("kafka-describe-cluster") / "data")
    Admin(broker).create_topic(TOPIC, partitions=len(LEADERS))
    served = ClusterBroker(broker)
    listener = KafkaListener(served, "127.0.0.1", 0)  # type: ignore[arg-type]
    view = FakeClusterView(listener.port, broker.metadata.journal_partitions)
    listener.context.cluster = KafkaCluster(ME, view, served)  # type: ignore[arg-type]
    listener.start()
    try:
        yield SimpleNamespace(broker=broker, listener=listener)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def test_a_partition_without_a_replica_here_is_not_leader_or_follower(raw: Any) -> None:
    Asked = DescribeProducersRequest.TopicRequest
    request = DescribeProducersRequest(topics=[Asked(name=TOPIC, partition_indexes=[0, 1])])
    answer = raw.call(request, DescribeProducersResponse, 0)
    codes = [p.error_code for p in answer.topics[0].partitions]
    assert codes == [NONE, NOT_LEADER_OR_FOLLOWER]


def _id_coordinated_by(broker_id: int, journal_partitions: int) -> str:
    for number in range(1000):
        candidate = f"dt-cluster-{number}"
        partition = coordinator_partition_of_transactional_id(candidate, journal_partitions)
        if _journal_leader(partition) == broker_id:
            return candidate
    raise AssertionError(f"no transactional id lands on broker {broker_id}")


def test_an_id_another_broker_coordinates_is_not_coordinator(kafka_server: Any, raw: Any) -> None:
    count = kafka_server.broker.metadata.journal_partitions
    elsewhere = _id_coordinated_by(OTHER, count)
    here = _id_coordinated_by(ME, count)
    request = DescribeTransactionsRequest(transactional_ids=[elsewhere, here])
    states = raw.call(request, DescribeTransactionsResponse, 0).transaction_states
    assert [(s.transactional_id, s.error_code) for s in states] == [
        (elsewhere, NOT_COORDINATOR),
        (here, TRANSACTIONAL_ID_NOT_FOUND),
    ]
