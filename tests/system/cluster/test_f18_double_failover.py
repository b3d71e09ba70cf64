"""F18: a rapid double failover (KIP-279, KAFKA-6361). Leader A dies while follower B
lags behind follower C; B is elected and takes a batch C never fetches; B dies at once
and C is elected. C holds epoch-0 records B never had, B holds an epoch-1 batch C never
had: when A and B return they cut what C does not hold, by leader epoch, and every
replica ends identical with nothing acknowledged lost. A consumer reads throughout (F23)."""

from __future__ import annotations

import pytest
from cluster_checks import check_history, check_replicas_agree, partition_directory, raw_values
from cluster_faults import EXPIRY_S, FaultCluster, followers, wait_until
from cluster_workload import AckedProducer, OneProduce, TailingConsumer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

UNACKNOWLEDGED_TIMEOUT_MS = 30_000


def test_f18_rapid_double_failover_leaves_no_divergence(cluster: FaultCluster, topic: str) -> None:
    state = cluster.create_topic(topic)
    a = state.leader
    b, c = followers(state)  # assignment order: B is elected before C
    b_dir = partition_directory(cluster.brokers[b].data_dir, topic)
    c_dir = partition_directory(cluster.brokers[c].data_dir, topic)
    producer = AckedProducer(cluster, topic, "f18")
    with TailingConsumer(cluster, topic) as consumer:
        producer.send_many(10)
        # B lags: its disk refuses the next batch, which C copies.
        cluster.brokers[b].disk_full_flag.touch()
        OneProduce(cluster, topic, a, b"c-not-b", UNACKNOWLEDGED_TIMEOUT_MS)
        wait_until(lambda: b"c-not-b" in raw_values(c_dir).values(), "C copied what B lacks")
        cluster.brokers[b].inbound_link.hold()  # C will never fetch from B
        cluster.brokers[a].kill()
        cluster.brokers[b].disk_full_flag.unlink()
        first = cluster.wait_state(topic, lambda s: s.leader >= 0 and s.leader != a, "B", EXPIRY_S)
        assert first.leader == b, f"C was elected first: {first.describe()}"
        OneProduce(cluster, topic, b, b"b-not-c", UNACKNOWLEDGED_TIMEOUT_MS)
        wait_until(lambda: b"b-not-c" in raw_values(b_dir).values(), "B took an epoch-1 batch")
        cluster.brokers[b].kill()
        second = cluster.wait_state(topic, lambda s: s.leader == c, "C elected", EXPIRY_S)
        assert second.leader_epoch == first.leader_epoch + 1
        assert b"c-not-b" not in raw_values(b_dir).values()
        cluster.heal()  # A and B return and follow C
        producer.send_many(10)
        cluster.wait_in_sync(topic)
    committed = check_replicas_agree(cluster, topic)
    check_history(committed, [producer], [consumer])
    assert b"c-not-b" in committed.values.values()  # C led with it: it stays
    assert b"b-not-c" not in committed.values.values()
    assert "truncating" in cluster.brokers[b].log_since_start()
    assert len(consumer.reads_from) >= 2, "the consumer did not read across a failover"
