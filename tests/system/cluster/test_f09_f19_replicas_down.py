"""F9: two of three brokers killed: writes are refused with NotEnoughReplicasError,
nothing acknowledged is lost, and writes resume when one returns. F19: every ISR member
down: the partition is offline, a replica outside the ISR is never elected (no unclean
election), and it returns intact with its last ISR member."""

from __future__ import annotations

import pytest
from broker_support import batch
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import EXPIRY_S, FaultCluster, followers, holds_throughout, wait_until
from cluster_workload import AckedProducer, refuses_writes

from twinlog.engine.base.errors import NotLeaderOrFollowerError

pytestmark = [pytest.mark.slow, pytest.mark.crash]

OFFLINE_WATCH_S = 2.0  # how long a partition with no ISR member alive is watched staying so


def test_f09_two_of_three_killed_refuses_writes_and_resumes_when_one_returns(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    producer = AckedProducer(cluster, topic, "f09")
    producer.send_many(20)
    first, second = followers(state)
    cluster.brokers[first].kill()
    cluster.brokers[second].kill()
    alone = cluster.wait_state(
        topic, lambda s: s.isr_ids == (state.leader,), "the ISR down to the leader", EXPIRY_S
    )
    assert alone.leader == state.leader
    wait_until(lambda: refuses_writes(cluster, topic, state.leader), "NotEnoughReplicasError")
    cluster.restart(first)
    cluster.wait_in_sync(topic, (state.leader, first))
    producer.send_many(10)  # acknowledged again, with two in sync
    cluster.heal()
    check_history(check_replicas_agree(cluster, topic), [producer])


def test_f19_every_isr_member_down_keeps_the_partition_offline_until_one_returns(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    producer = AckedProducer(cluster, topic, "f19")
    producer.send_many(20)
    last = state.leader
    outside = followers(state)
    for broker_id in outside:
        cluster.brokers[broker_id].kill()
    cluster.wait_state(topic, lambda s: s.isr_ids == (last,), "the ISR down to one", EXPIRY_S)
    cluster.brokers[last].kill()
    cluster.restart(*outside)  # alive again, but out of the ISR: never electable
    offline = cluster.wait_state(topic, lambda s: s.offline, "offline", EXPIRY_S)
    assert offline.isr_ids == (last,)
    holds_throughout(
        lambda: (now := cluster.state(topic)) is not None and now.offline,
        "no unclean election: the partition stays offline",
        OFFLINE_WATCH_S,
    )
    for broker_id in outside:
        with cluster.client(broker_id) as remote:
            with pytest.raises(NotLeaderOrFollowerError):
                remote.produce(topic, 0, batch([b"refused"]))
    cluster.restart(last)
    back = cluster.wait_state(topic, lambda s: s.leader == last, "its last ISR member leads")
    assert back.leader_epoch > offline.leader_epoch
    producer.send_many(10)
    check_history(check_replicas_agree(cluster, topic), [producer])
