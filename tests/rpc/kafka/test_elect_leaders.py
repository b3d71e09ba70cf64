"""ElectLeaders (KIP-460) on one node: every partition is led by its one replica already
(ELECTION_NOT_NEEDED), UNCLEAN is refused, an unknown partition says so; kafka-python's
``elect_leaders`` reads the answer. The cluster's moves are in the system tests."""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from twinlog.rpc.kafka.elect_leaders import ELECTION_NOT_NEEDED
from twinlog.rpc.kafka.error_codes import INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION

Asked = ElectLeadersRequest.TopicPartitions


def _codes(answer: Any) -> dict[tuple[str, int], int]:
    return {
        (topic.topic, partition.partition_id): partition.error_code
        for topic in answer.replica_election_results
        for partition in topic.partition_result
    }


def test_one_node_needs_no_election_and_kafka_python_reads_it(kafka_server: Any) -> None:
    topic = kafka_server.topic(partitions=2)
    client = KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10_000)
    try:
        answer = client.elect_leaders(0, {topic: [0, 1]}, timeout_ms=5_000)
    finally:
        client.close()
    assert _codes(answer) == {(topic, 0): ELECTION_NOT_NEEDED, (topic, 1): ELECTION_NOT_NEEDED}


def test_unclean_and_unknown_partitions_are_answered_per_partition(
    kafka_server: Any, raw: Any
) -> None:
    topic = kafka_server.topic()
    asked = [Asked(topic=topic, partitions=[0, 5])]
    preferred = raw.call(
        ElectLeadersRequest(election_type=0, topic_partitions=asked, timeout_ms=5_000),
        ElectLeadersResponse,
        2,
    )
    assert preferred.error_code == 0
    assert _codes(preferred) == {
        (topic, 0): ELECTION_NOT_NEEDED,
        (topic, 5): UNKNOWN_TOPIC_OR_PARTITION,
    }
    unclean = raw.call(
        ElectLeadersRequest(election_type=1, topic_partitions=asked, timeout_ms=5_000),
        ElectLeadersResponse,
        1,
    )
    assert set(_codes(unclean).values()) == {INVALID_REQUEST}
    (message,) = {
        p.error_message for t in unclean.replica_election_results for p in t.partition_result
    }
    assert "only PREFERRED" in message
    # v0 (no election type, no top-level code), every partition of every topic
    every = raw.call(
        ElectLeadersRequest(topic_partitions=None, timeout_ms=5_000), ElectLeadersResponse, 0
    )
    assert (topic, 0) in _codes(every)
    assert set(_codes(every).values()) == {ELECTION_NOT_NEEDED}
