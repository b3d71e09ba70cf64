"""The listener of a cluster broker (``rpc/kafka/cluster.py``), without ZooKeeper: an
embedded broker as broker 7 of a cluster whose state a fake metadata source holds.

Broker 8 has a Kafka listener, broker 9 none. Partition 0 is led by 8, partition 1 is
offline, partition 2 is led by 9, partition 3 by this broker. The broker refuses what the
cluster says it does not lead, as a cluster broker's engine does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from twinlog.engine.base.cluster_metadata import (
    BrokerEndpoint,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.records.batch_builder import build_batch
from twinlog.rpc.client import Admin
from twinlog.rpc.kafka.cluster import KafkaCluster
from twinlog.rpc.kafka.error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    LEADER_NOT_AVAILABLE,
    LISTENER_NOT_FOUND,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
)
from twinlog.rpc.kafka.listener import KafkaListener

ME, OTHER, NO_LISTENER = 7, 8, 9
TOPIC = "spread"
LEADERS = {0: OTHER, 1: -1, 2: NO_LISTENER, 3: ME}


class FakeClusterView:
    def __init__(self, kafka_port: int) -> None:
        self.kafka_port = kafka_port

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        replicas = (ME, OTHER, NO_LISTENER)
        partitions = tuple(
            PartitionMetadata(number, leader, 3, replicas, (ME, OTHER))
            for number, leader in LEADERS.items()
        )
        return ClusterMetadata(
            cluster_id="c0ffee",
            controller_id=OTHER,
            brokers=(
                BrokerEndpoint(ME, "127.0.0.1", 7070, "127.0.0.1", self.kafka_port),
                BrokerEndpoint(OTHER, "b8", 7071, "b8", 9098),
                BrokerEndpoint(NO_LISTENER, "b9", 7072),
            ),
            topics=(
                TopicMetadata(TOPIC, partitions),
                TopicMetadata(OFFSETS_TOPIC, (PartitionMetadata(0, OTHER, 1, (OTHER,), ()),)),
                TopicMetadata(
                    TXN_JOURNAL_TOPIC,
                    tuple(PartitionMetadata(n, -1, 1, (OTHER,), ()) for n in range(4)),
                ),
            ),
        )


class ClusterBroker:
    """The embedded broker, refusing what the cluster says another broker leads."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    def _check(self, partition: int) -> None:
        if LEADERS[partition] != ME:
            raise NotLeaderOrFollowerError(f"{TOPIC}-{partition}: not led here")

    def produce(self, topic: str, partition: int, batch: bytes, **kwargs: Any) -> Any:
        self._check(partition)
        return self._broker.produce(topic, partition, batch, **kwargs)

    def fetch(self, topic: str, partition: int, offset: int, **kwargs: Any) -> Any:
        self._check(partition)
        return self._broker.fetch(topic, partition, offset, **kwargs)

    def list_offset(self, topic: str, partition: int, spec: Any) -> int:
        self._check(partition)
        return self._broker.list_offset(topic, partition, spec)


@pytest.fixture(scope="module")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """This module's listener, for the ``raw`` connections of ``conftest.py``."""
    broker = Broker.open(tmp_path_factory.mktemp("kafka-cluster") / "data")
    Admin(broker).create_topic(TOPIC, partitions=len(LEADERS))
    served = ClusterBroker(broker)
    listener = KafkaListener(served, "127.0.0.1", 0)  # type: ignore[arg-type]
    view = FakeClusterView(listener.port)
    listener.context.cluster = KafkaCluster(ME, view, served)  # type: ignore[arg-type]
    listener.start()
    try:
        yield SimpleNamespace(broker=broker, listener=listener)
    finally:
        listener.stop(grace_ms=2_000)
        broker.close()


def test_metadata_names_the_cluster(raw: Any) -> None:
    Wanted = MetadataRequest.MetadataRequestTopic
    answer = raw.call(
        MetadataRequest(topics=[Wanted(name=TOPIC, topic_id=None)]), MetadataResponse, 12
    )
    brokers = {item.node_id: (item.host, item.port) for item in answer.brokers}
    assert brokers.keys() == {ME, OTHER}  # 9 has no Kafka listener
    assert brokers[OTHER] == ("b8", 9098)
    assert answer.controller_id == OTHER and answer.cluster_id == "c0ffee"
    [topic] = answer.topics
    found = {item.partition_index: item for item in topic.partitions}
    assert [(found[n].error_code, found[n].leader_id) for n in range(4)] == [
        (NONE, OTHER),
        (LEADER_NOT_AVAILABLE, -1),
        (LISTENER_NOT_FOUND, -1),
        (NONE, ME),
    ]
    assert found[0].replica_nodes == [ME, OTHER, NO_LISTENER]
    assert found[0].isr_nodes == [ME, OTHER]
    assert found[0].offline_replicas == []
    assert found[0].leader_epoch == 3  # the partition state's


def _produce(raw: Any, partition: int) -> int:
    code: int = _produce_answer(raw, partition, 9).responses[0].partition_responses[0].error_code
    return code


def _produce_answer(raw: Any, partition: int, version: int) -> Any:
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5_000,
        topic_data=[
            Topic(
                name=TOPIC,
                partition_data=[
                    Topic.PartitionProduceData(index=partition, records=build_batch([b"x"]))
                ],
            )
        ],
    )
    return raw.call(request, ProduceResponse, version)


def test_produce_at_a_broker_that_does_not_lead_says_who_should(raw: Any) -> None:
    assert [_produce(raw, partition) for partition in range(4)] == [
        NOT_LEADER_OR_FOLLOWER,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        NONE,
    ]


def test_produce_v10_names_the_leader_and_where_its_listener_is(raw: Any) -> None:
    """KIP-951: the client goes to the leader without asking for metadata first."""
    answer = _produce_answer(raw, 0, 10)
    [partition] = answer.responses[0].partition_responses
    assert partition.error_code == NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        OTHER,
        3,
    )
    assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(OTHER, "b8", 9098)]
    offline = _produce_answer(raw, 1, 10)  # no leader: nothing to name
    assert offline.node_endpoints == []
    assert offline.responses[0].partition_responses[0].current_leader is None


def _fetch_request(partitions: Sequence[int]) -> FetchRequest:
    Fetched = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Fetched(
                topic=TOPIC,
                partitions=[
                    Fetched.FetchPartition(
                        partition=n,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for n in partitions
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_fetch_v12_names_the_leader_and_v16_its_listener(raw: Any) -> None:
    answer = raw.call(_fetch_request([0, 3]), FetchResponse, 12)
    moved, mine = answer.responses[0].partitions
    assert moved.error_code == NOT_LEADER_OR_FOLLOWER and mine.error_code == NONE
    assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == (OTHER, 3)
    assert mine.current_leader is None  # nothing to tell where it is answered
    # v16 names topics by id: ask by the id Metadata gives
    Wanted = MetadataRequest.MetadataRequestTopic
    metadata = raw.call(
        MetadataRequest(topics=[Wanted(name=TOPIC, topic_id=None)]), MetadataResponse, 12
    )
    request = _fetch_request([0])
    request.topics[0].topic_id = metadata.topics[0].topic_id
    answer = raw.call(request, FetchResponse, 16)
    assert answer.responses[0].partitions[0].current_leader.leader_id == OTHER
    assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(OTHER, "b8", 9098)]


def test_fetch_and_list_offsets_at_a_broker_that_does_not_lead(raw: Any) -> None:
    fetch = _fetch_request([0, 1])
    answer = raw.call(fetch, FetchResponse, 12)
    codes = [item.error_code for item in answer.responses[0].partitions]
    assert codes == [NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE]
    Listed = ListOffsetsRequest.ListOffsetsTopic
    listing = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            Listed(
                name=TOPIC,
                partitions=[
                    Listed.ListOffsetsPartition(
                        partition_index=n, current_leader_epoch=-1, timestamp=-1
                    )
                    for n in (0, 1, 3)
                ],
            )
        ],
    )
    answer = raw.call(listing, ListOffsetsResponse, 7)
    codes = [item.error_code for item in answer.topics[0].partitions]
    assert codes == [NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, NONE]


def test_find_coordinator_names_the_coordinating_broker(raw: Any) -> None:
    group = raw.call(
        FindCoordinatorRequest(key_type=0, coordinator_keys=["readers"]),
        FindCoordinatorResponse,
        4,
    ).coordinators[0]
    assert (group.error_code, group.node_id, group.host, group.port) == (NONE, OTHER, "b8", 9098)
    # every journal partition is offline: no transaction coordinator yet, retriable
    txn = raw.call(
        FindCoordinatorRequest(key_type=1, coordinator_keys=["writer"]),
        FindCoordinatorResponse,
        4,
    ).coordinators[0]
    assert (txn.error_code, txn.node_id) == (COORDINATOR_NOT_AVAILABLE, -1)
    old = raw.call(FindCoordinatorRequest(key="readers"), FindCoordinatorResponse, 0)
    assert (old.error_code, old.node_id, old.port) == (NONE, OTHER, 9098)
