"""F20: the whole cluster SIGKILLed at once and started again recovers from its disks;
nothing acknowledged is lost, and the replicas agree."""

from __future__ import annotations

import pytest
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import BROKER_IDS, FaultCluster, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def test_f20_whole_cluster_killed_and_restarted_loses_nothing(
    cluster: FaultCluster, topic: str
) -> None:
    before = cluster.create_topic(topic)
    producer = AckedProducer(cluster, topic, "f20")
    with TailingConsumer(cluster, topic) as consumer:
        with BackgroundProducer(producer) as background:
            wait_until(lambda: background.acknowledged_count() >= 20, "20 acknowledged writes")
            for broker_id in BROKER_IDS:  # mid-write: one batch is in flight
                cluster.brokers[broker_id].kill()
        cluster.restart(*BROKER_IDS)
        after = cluster.wait_in_sync(topic)
        producer.send_many(10)
    assert after.leader_epoch > before.leader_epoch
    committed = check_replicas_agree(cluster, topic)
    check_history(committed, [producer], [consumer])
    assert len(producer.acknowledged) >= 30
