"""F10: a follower killed and restarted, and one restarted with a wiped data directory,
truncates, catches up, and rejoins the ISR only when caught up and with its new broker
epoch (KIP-903)."""

from __future__ import annotations

import pytest
from cluster_checks import check_history, check_replicas_agree, partition_directory, raw_values
from cluster_faults import EXPIRY_S, FaultCluster, followers, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer, refuses_writes

from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.zookeeper.checkpoint_pointer import ZooKeeperCheckpointPointer

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def test_f10_killed_follower_rejoins_the_isr_with_its_new_broker_epoch(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    follower = followers(state)[-1]
    old_epoch = cluster.registered()[follower].broker_epoch
    producer = AckedProducer(cluster, topic, "f10")
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        wait_until(lambda: background.acknowledged_count() >= 10, "10 acknowledged writes")
        cluster.brokers[follower].kill()
        cluster.wait_state(
            topic, lambda s: follower not in s.isr_ids, "the dead follower left", EXPIRY_S
        )
        acknowledged = background.acknowledged_count()
        wait_until(  # min ISR 2 of 2 left: writes go on without it
            lambda: background.acknowledged_count() >= acknowledged + 10, "writes go on"
        )
        cluster.restart(follower)
        rejoined = cluster.wait_in_sync(topic)
    new_epoch = cluster.registered()[follower].broker_epoch
    assert new_epoch > old_epoch
    assert {m.broker_id: m.broker_epoch for m in rejoined.isr}[follower] == new_epoch
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])


def test_f10_follower_started_again_at_once_waits_out_its_old_session(
    cluster: FaultCluster, topic: str
) -> None:
    """A supervisor restarts a SIGKILLed broker without a delay (systemd, Kubernetes): it
    meets its own registration, still held by the dead session, waits for ZooKeeper to
    expire it instead of exiting, and rejoins the ISR with a new broker epoch."""
    state = cluster.create_topic(topic)
    follower = followers(state)[-1]
    old_epoch = cluster.registered()[follower].broker_epoch
    producer = AckedProducer(cluster, topic, "f10a")
    with BackgroundProducer(producer) as background:
        wait_until(lambda: background.acknowledged_count() >= 10, "10 acknowledged writes")
        cluster.brokers[follower].kill()
        assert follower in cluster.registered()  # the dead session still holds it
        cluster.restart(follower, at_once=True)
        rejoined = cluster.wait_in_sync(topic)
    started = cluster.brokers[follower].log_since_start()
    assert "still registered by this data directory's previous run" in started
    assert "previous run's registration expired after" in started
    new_epoch = cluster.registered()[follower].broker_epoch
    assert {m.broker_id: m.broker_epoch for m in rejoined.isr}[follower] == new_epoch > old_epoch
    check_history(check_replicas_agree(cluster, topic), [producer], [])


def test_f10_wiped_follower_rejoins_only_when_caught_up(cluster: FaultCluster, topic: str) -> None:
    """The rebuilt replica is made the only survivor the moment it is back in the ISR: if it
    had joined before holding every acknowledged record, they would be gone now."""
    state = cluster.create_topic(topic)
    follower = followers(state)[-1]
    others = [broker_id for broker_id in state.replicas if broker_id != follower]
    producer = AckedProducer(cluster, topic, "f10w", value_bytes=4096)
    producer.send_many(150)  # ~600 KiB to copy again
    cluster.brokers[follower].kill()
    cluster.brokers[follower].wipe()
    with BackgroundProducer(producer) as background:
        cluster.restart(follower)
        cluster.wait_state(
            topic, lambda s: follower in s.isr_ids, "the rebuilt follower back in the ISR"
        )
        for broker_id in others:
            cluster.brokers[broker_id].kill()
    acknowledged = dict(producer.acknowledged)
    assert background.acknowledged_count() > 150
    survivor = cluster.wait_state(
        topic, lambda s: s.leader == follower, "the rebuilt replica elected", EXPIRY_S
    )
    assert survivor.isr_ids == (follower,)
    # F9's rule too: one in-sync replica, no writes.
    wait_until(lambda: refuses_writes(cluster, topic, follower), "NotEnoughReplicasError")
    held = raw_values(partition_directory(cluster.brokers[follower].data_dir, topic))
    missing = {v: o for v, o in acknowledged.items() if held.get(o) != v}
    assert not missing, f"the rebuilt replica joined the ISR without {len(missing)} records"
    cluster.heal()
    check_history(check_replicas_agree(cluster, topic), [producer])


def test_f10_wiped_broker_rebuilds_its_copy_of_the_coordinators_journal(
    cluster: FaultCluster, topic: str
) -> None:
    """A follower whose disk was wiped starts again and rejoins the ISR of a topic and of
    ``__txn_journal-0`` (the coordinator's replicated journal, fetched again from its
    leader); the coordinator's checkpoint pointer in ZooKeeper is left as it was."""
    state = cluster.create_topic(topic)
    journal = cluster.wait_in_sync(TXN_JOURNAL_TOPIC)
    follower = next(b for b in followers(state) if b != journal.leader)
    pointer_before = ZooKeeperCheckpointPointer(cluster.session, 0).read()
    cluster.brokers[follower].kill()
    cluster.brokers[follower].wipe()
    cluster.restart(follower)
    cluster.wait_in_sync(topic)
    cluster.wait_in_sync(TXN_JOURNAL_TOPIC)
    pointer_after = ZooKeeperCheckpointPointer(cluster.session, 0).read()
    if pointer_before is not None:  # a checkpoint may have been written meanwhile, never lost
        assert pointer_after is not None
        assert pointer_after.checkpoint_offset >= pointer_before.checkpoint_offset
