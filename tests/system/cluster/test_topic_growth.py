"""A replicated topic grows on real processes: the controller gives the new partitions
three in-sync replicas and a leader each, a producer writes to them through the bootstrap
list, and a consumer reads what was written."""

from __future__ import annotations

import pytest
from cluster_faults import FaultCluster
from cluster_security import OPERATOR

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow]


def test_a_grown_replicated_topic_takes_writes_in_its_new_partitions(
    cluster: FaultCluster, topic: str
) -> None:
    cluster.create_topic(topic, partitions=1)
    with Admin(cluster.bootstrap, **cluster.client_arguments(OPERATOR)) as admin:
        grown = admin.create_partitions(topic, 3)
    assert [p.partition for p in grown.partitions] == [0, 1, 2]
    for partition in (1, 2):
        state = cluster.wait_in_sync(topic, partition=partition)
        assert len(state.replicas) == 3 and state.leader in state.replicas
    with Producer(cluster.bootstrap, **cluster.client_arguments(OPERATOR)) as producer:
        for partition in range(3):
            producer.send(topic, f"to-{partition}".encode(), partition=partition)
        producer.flush()
    with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", **cluster.client_arguments(OPERATOR)
    ) as consumer:
        consumer.assign([TopicPartition(topic, partition) for partition in range(3)])
        seen: dict[int, bytes | None] = {}
        for _ in range(50):
            for record in consumer.poll(timeout_ms=200):
                seen[record.partition] = record.value
            if len(seen) == 3:
                break
    assert seen == {partition: f"to-{partition}".encode() for partition in range(3)}
