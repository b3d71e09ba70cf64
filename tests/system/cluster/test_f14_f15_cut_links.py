"""Network partitions, by a TCP proxy on one link.

F14: a leader cut from ZooKeeper, still reachable by clients and followers: the cluster
elects another leader, the followers leave the old one (so nothing it takes afterwards is
acknowledged), and it exits once it knows its session is lost.
F15: a leader cut from its followers, still in ZooKeeper: it shrinks the ISR by a
conditional write, then refuses writes (min ISR 2); none is acknowledged wrongly, and the
followers rejoin once the link heals."""

from __future__ import annotations

import pytest
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import (
    EXPIRY_S,
    REPLICA_LAG_TIME_MAX_MS,
    FaultCluster,
    exited_on_session_loss,
    wait_until,
)
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer, refuses_writes

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def test_f14_leader_cut_from_zookeeper_is_replaced_and_exits(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    old = cluster.brokers[state.leader]
    producer = AckedProducer(cluster, topic, "f14")
    producer.send_many(5)
    stale = AckedProducer(cluster, topic, "f14-stale")  # a client that never learns
    old.zookeeper_link.hold()
    with (
        TailingConsumer(cluster, topic) as consumer,
        BackgroundProducer(producer) as background,
        BackgroundProducer(stale, broker_id=state.leader),
    ):
        successor = cluster.wait_state(
            topic, lambda s: s.leader not in (-1, state.leader), "a new leader", EXPIRY_S
        )
        assert state.leader not in successor.isr_ids
        assert successor.leader_epoch > state.leader_epoch
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 5, "new writes")
        assert exited_on_session_loss(old.wait_exit(EXPIRY_S)), old.log()[-3000:]
    cluster.heal()
    # Whatever the old leader acknowledged, to either client, is committed.
    check_history(check_replicas_agree(cluster, topic), [producer, stale], [consumer])


def test_f15_leader_cut_from_its_followers_shrinks_the_isr_and_refuses_writes(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    leader = cluster.brokers[state.leader]
    producer = AckedProducer(cluster, topic, "f15")
    producer.send_many(5)
    leader.inbound_link.hold()
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        acknowledged = background.acknowledged_count()
        shrunk = cluster.wait_state(
            topic,
            lambda s: s.isr_ids == (state.leader,),
            "the ISR shrunk to the leader",
            REPLICA_LAG_TIME_MAX_MS / 1000 + EXPIRY_S,
        )
        # Written by the leader (no election: it is still in ZooKeeper), over the version
        # it held: one write after the controller's creation, nothing else between.
        assert (shrunk.leader, shrunk.leader_epoch) == (state.leader, state.leader_epoch)
        assert shrunk.version == state.version + 1
        wait_until(lambda: refuses_writes(cluster, topic, state.leader), "writes refused")
        # At most the batch in flight when the link was cut (its replicas may have had it).
        assert background.acknowledged_count() <= acknowledged + 1
        leader.inbound_link.release()
        cluster.wait_in_sync(topic)
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 5, "writes resume")
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])
