"""F24: a full disk on a follower, then on the leader (the ``log.before_write`` failpoint
answers ENOSPC while a flag file exists: a small tmpfs would need root). The follower
drops out of the ISR and writes go on; the leader refuses writes with a retriable error;
nothing is lost, and once there is room again the follower catches up and rejoins."""

from __future__ import annotations

import pytest
from broker_support import batch
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import EXPIRY_S, REPLICA_LAG_TIME_MAX_MS, FaultCluster, followers, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer

from twinlog.engine.base.errors import TwinlogError

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def test_f24_full_disks_drop_the_follower_then_stop_the_leader_and_lose_nothing(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    follower = followers(state)[-1]
    producer = AckedProducer(cluster, topic, "f24")
    producer.send_many(5)
    cluster.brokers[follower].disk_full_flag.touch()
    with TailingConsumer(cluster, topic) as consumer:
        with BackgroundProducer(producer) as background:
            cluster.wait_state(
                topic,
                lambda s: follower not in s.isr_ids,
                "the full follower out of the ISR",
                REPLICA_LAG_TIME_MAX_MS / 1000 + EXPIRY_S,
            )
            acknowledged = background.acknowledged_count()
            wait_until(lambda: background.acknowledged_count() >= acknowledged + 5, "writes go on")
        cluster.brokers[state.leader].disk_full_flag.touch()
        with cluster.client(state.leader) as remote:
            with pytest.raises(TwinlogError) as refused:
                remote.produce(topic, 0, batch([b"no-room"]))
        assert refused.value.retriable, refused.value
        cluster.heal()  # room again on both
        cluster.wait_in_sync(topic)
        producer.send_many(5)
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])
