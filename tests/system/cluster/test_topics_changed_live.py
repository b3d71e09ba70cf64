"""Topics changed live on real processes: a replicated topic grows (the controller gives
the new partitions three in-sync replicas and a leader each; a producer writes to them
and a consumer reads it), and a setting changed through one broker is taken by the
partition's leader on another without a restart."""

from __future__ import annotations

import os

import pytest
from broker_support import batch
from cluster_checks import check_replicas_agree
from cluster_faults import FaultCluster, wait_until
from cluster_security import OPERATOR

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client import Admin, Consumer, Producer
from twinlog.rpc.client.remote import RemoteBroker

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


def test_a_setting_changed_through_one_broker_is_taken_by_the_leader_elsewhere(
    cluster: FaultCluster, topic: str
) -> None:
    """max.message.bytes raised through a broker that does not lead the partition: the
    leader, told by its ZooKeeper watch, takes a batch the old limit refused, and the
    followers copy it."""
    state = cluster.create_topic(topic)
    other = next(b for b in state.replicas if b != state.leader)
    big = batch([os.urandom(6000)])  # incompressible
    with cluster.client(other, principal=OPERATOR) as remote:
        remote.alter_topic_config(topic, {"max.message.bytes": "4096"})
    with cluster.client(state.leader, principal=OPERATOR) as remote:
        wait_until(lambda: _refused(remote, topic, big), "the leader refuses a big batch", 20)
    with cluster.client(other, principal=OPERATOR) as remote:
        remote.alter_topic_config(topic, {}, ["max.message.bytes"])  # the default: 1 MiB
    with cluster.client(state.leader, principal=OPERATOR) as remote:
        wait_until(lambda: not _refused(remote, topic, big), "the leader takes it", 20)
    check_replicas_agree(cluster, topic)


def _refused(remote: RemoteBroker, topic: str, payload: bytes) -> bool:
    try:
        remote.produce(topic, 0, payload)
    except BatchTooLargeError:
        return True
    return False


def test_min_insync_replicas_set_on_a_topic_refuses_writes_with_a_follower_down(
    cluster: FaultCluster, topic: str
) -> None:
    """The broker's min_insync_replicas is 2; the topic asks for 3 (through a follower):
    with one follower down the leader refuses writes, retriably, until the topic's
    setting goes back to the broker's."""
    state = cluster.create_topic(topic)
    follower = next(b for b in state.replicas if b != state.leader)
    with cluster.client(follower, principal=OPERATOR) as remote:
        remote.alter_topic_config(topic, {"min.insync.replicas": "3"})
    cluster.brokers[follower].kill()
    cluster.wait_state(topic, lambda s: follower not in s.isr_ids, "the follower left the ISR")
    with cluster.client(state.leader, principal=OPERATOR) as remote:
        # Refused before the append once the leader knows the smaller ISR; after it (the
        # write may or may not be kept), when its ISR shrank between the check and the wait.
        with pytest.raises(
            (NotEnoughReplicasError, NotEnoughReplicasAfterAppendError),
            match="below min_insync_replicas 3",
        ):
            remote.produce(topic, 0, batch([b"refused"]))
        remote.alter_topic_config(topic, {}, ["min.insync.replicas"])
        assert remote.produce(topic, 0, batch([b"taken"])).base_offset >= 0
