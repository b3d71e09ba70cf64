"""SIGSTOP past the session timeout, then SIGCONT (CLUSTER.md walkthrough 3).

F11: a paused leader is replaced; once running again it acknowledges nothing, exits on
its lost session (crash-only), and after its restart the suffix only it held is cut.
F13: a paused controller is replaced by one with the next controller epoch; once running
again it decides nothing under its old epoch, and exits."""

from __future__ import annotations

import pytest
from cluster_checks import check_history, check_replicas_agree, partition_directory, raw_values
from cluster_faults import EXPIRY_S, FaultCluster, exited_on_session_loss, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, OneProduce, TailingConsumer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

ZOMBIE_PRODUCE_TIMEOUT_MS = 60_000  # the client waits longer than the zombie lives


def test_f11_paused_leader_acknowledges_nothing_exits_and_loses_its_suffix(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    zombie = cluster.brokers[state.leader]
    zombie_dir = partition_directory(zombie.data_dir, topic)
    producer = AckedProducer(cluster, topic, "f11")
    producer.send_many(10)
    # A batch only the leader holds: its followers cannot fetch it, and it waits for them.
    # The link stays cut until the zombie is gone: an answer held in it would otherwise
    # reach a follower that still follows the zombie, and the batch would not be its own.
    zombie.inbound_link.hold()
    stray = OneProduce(cluster, topic, state.leader, b"zombie-only", ZOMBIE_PRODUCE_TIMEOUT_MS)
    wait_until(lambda: b"zombie-only" in raw_values(zombie_dir).values(), "the stray appended")
    zombie.pause()
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        successor = cluster.wait_state(
            topic, lambda s: s.leader not in (-1, state.leader), "a new leader", EXPIRY_S
        )
        assert successor.leader_epoch > state.leader_epoch
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 5, "new writes")
        zombie.resume()
        assert exited_on_session_loss(zombie.wait_exit(EXPIRY_S)), zombie.log()[-3000:]
        assert not isinstance(stray.wait(EXPIRY_S), int), "the zombie acknowledged a write"
    zombie.inbound_link.release()
    assert b"zombie-only" in raw_values(zombie_dir).values()  # its suffix, before restart
    cluster.restart(state.leader)
    producer.send_many(5)  # past the suffix's offsets, at the new leader
    committed = check_replicas_agree(cluster, topic)
    check_history(committed, [producer], [consumer])
    assert b"zombie-only" not in committed.values.values()
    assert "truncating" in zombie.log_since_start(), "the suffix was not cut by epoch"


def test_f13_paused_controller_is_replaced_and_decides_nothing_after(
    cluster: FaultCluster, topic: str
) -> None:
    cluster.create_topic(topic)
    producer = AckedProducer(cluster, topic, "f13")
    producer.send_many(5)
    old_id, old_epoch = wait_until(cluster.controller, "a controller")
    zombie = cluster.brokers[old_id]
    zombie.pause()
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer):
        new_id, new_epoch = wait_until(
            lambda: (held := cluster.controller()) and held[1] > old_epoch and held,
            "a new controller",
            EXPIRY_S,
        )
        assert new_id != old_id and new_epoch == old_epoch + 1
        # The new controller acted: the paused broker leads nothing and left the ISR.
        moved = cluster.wait_state(
            topic,
            lambda s: s.leader not in (-1, old_id) and old_id not in s.isr_ids,
            "the paused broker out of the partition's leadership and ISR",
        )
        assert moved.controller_epoch == new_epoch
        log_before = len(zombie.log())
        zombie.resume()
        assert exited_on_session_loss(zombie.wait_exit(EXPIRY_S)), zombie.log()[-3000:]
    after_pause = zombie.log()[log_before:]
    # A decision is logged only once its multi committed: none under the old epoch.
    assert f"(controller epoch {old_epoch})" not in after_pause, after_pause[-3000:]
    assert wait_until(cluster.controller, "a controller")[1] >= new_epoch
    cluster.restart(old_id)
    producer.send_many(5)
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])
