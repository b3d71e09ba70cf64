"""A group coordinator's broker killed (SIGKILL): the group's offsets live in its
``__consumer_offsets`` partition, replicated like any topic, so the partition's next
leader loads them and becomes the group coordinator; a consumer's commit and fetch follow
it (FindCoordinator, NotCoordinatorError), and a transactional offset commit reaches it
too, whichever broker coordinates the transaction (CLUSTER.md §3.7)."""

from __future__ import annotations

import pytest
from cluster_checks import check_replicas_agree
from cluster_faults import EXPIRY_S, FaultCluster

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC
from twinlog.rpc.client.consumer import Consumer
from twinlog.rpc.client.producer import Producer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

GROUP = "billing"
API_TIMEOUT_MS = 60_000  # a call retried across a failover (session timeout + election)
REQUEST_TIMEOUT_MS = 3_000


def _consumer(cluster: FaultCluster) -> Consumer:
    return Consumer(
        cluster.bootstrap,
        group_id=GROUP,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        default_api_timeout_ms=API_TIMEOUT_MS,
        **cluster.client_arguments(),
    )


def test_group_offsets_survive_their_coordinator_killed(cluster: FaultCluster, topic: str) -> None:
    cluster.create_topic(topic, 2)
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
    coordinator = cluster.wait_in_sync(OFFSETS_TOPIC).leader  # the rig has one offsets partition
    with _consumer(cluster) as consumer:
        consumer.commit({first: 5, second: 7})  # answered once every in-sync replica has it
        cluster.brokers[coordinator].kill()
        successor = cluster.wait_state(
            OFFSETS_TOPIC,
            lambda s: s.leader not in (-1, coordinator),
            "a new group coordinator",
            EXPIRY_S,
        )
        assert successor.leader != coordinator
        assert consumer.committed([first, second]) == {first: 5, second: 7}
        consumer.commit({first: 9})
        assert consumer.committed([first]) == {first: 9}

    producer = Producer(
        cluster.bootstrap,
        transactional_id=f"{topic}-etl",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        default_api_timeout_ms=API_TIMEOUT_MS,
        max_block_ms=API_TIMEOUT_MS,
        delivery_timeout_ms=API_TIMEOUT_MS,
        linger_ms=0,
        **cluster.client_arguments(),
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"derived", partition=0)
        producer.send_offsets_to_transaction({second: 11}, GROUP)
        producer.commit_transaction()
    finally:
        producer.close(timeout_ms=1000)
    with _consumer(cluster) as consumer:
        assert consumer.committed([first, second]) == {first: 9, second: 11}

    cluster.restart(coordinator)
    with _consumer(cluster) as consumer:  # the restarted broker caught up; nothing changed
        assert consumer.committed([first, second]) == {first: 9, second: 11}
    check_replicas_agree(cluster, OFFSETS_TOPIC)
