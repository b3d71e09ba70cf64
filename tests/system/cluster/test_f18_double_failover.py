"""F18: a rapid double failover (KIP-279, KAFKA-6361). Leader A dies while follower B
lags behind follower C; B is elected and dies at once, before C fetches from it; C is
elected. C holds epoch-0 records B never had; B holds epoch 1 in its epoch history (and,
without a promotion barrier, a batch C never had). When A and B return they keep only
what C holds, and every replica ends identical with nothing acknowledged lost. A
consumer reads throughout (F23)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_checks import check_history, check_replicas_agree, partition_directory, raw_values
from cluster_faults import EXPIRY_S, FaultCluster, followers, wait_until
from cluster_workload import AckedProducer, OneProduce, TailingConsumer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

UNACKNOWLEDGED_TIMEOUT_MS = 30_000
STRAY_SETTLE_S = 2.0  # how long B is given to append (or refuse) a batch before it dies


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
        leads = f"{topic}-0: lead (leader {b}, epoch {first.leader_epoch},"
        wait_until(lambda: leads in cluster.brokers[b].log_since_start(), "B leads")
        # B cannot commit a write (C never fetches from it); behind its promotion barrier
        # it may not even append one. Either way it dies with nothing acknowledged.
        stray = OneProduce(cluster, topic, b, b"b-not-c", UNACKNOWLEDGED_TIMEOUT_MS)
        b_took_a_batch = _appended_within(b_dir, b"b-not-c", stray, STRAY_SETTLE_S)
        cluster.brokers[b].kill()
        assert not isinstance(stray.wait(EXPIRY_S), int), "B acknowledged a write"
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
    if b_took_a_batch:  # its epoch-1 suffix, which C never had, was cut by epoch
        assert "truncating" in cluster.brokers[b].log_since_start()
    assert len(consumer.reads_from) >= 2, "the consumer did not read across a failover"


def _appended_within(directory: Path, value: bytes, stray: OneProduce, seconds: float) -> bool:
    """Whether ``value`` reached the log in ``directory`` before ``seconds`` passed or the
    produce was answered (a leader behind its promotion barrier appends nothing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and stray.outcome is None:
        if value in raw_values(directory).values():
            return True
        time.sleep(0.05)
    return value in raw_values(directory).values()
