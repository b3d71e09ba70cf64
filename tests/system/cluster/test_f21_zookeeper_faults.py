"""F21: ZooKeeper itself fails.

- The standalone server paused past the session timeout: nothing changes in the
  cluster meanwhile (no leadership change); the brokers, whose sessions are gone by
  their own clock, exit (crash-only) and rejoin when restarted; nothing is lost.
- The standalone server killed and restarted on its port: each broker either kept its
  session (the server restores sessions from its log) or exited and rejoins; nothing
  is lost.
- (A three-server ensemble whose leader is killed: test_f21_zookeeper_ensemble.py.)"""

from __future__ import annotations

import time

import pytest
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import (
    BROKER_IDS,
    EXPIRY_S,
    SESSION_TIMEOUT_MS,
    FaultCluster,
    exited_on_session_loss,
    wait_until,
)
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

pytestmark = [pytest.mark.slow, pytest.mark.crash]

# A broker notices a silent server within about 2/3 of the session timeout (SUSPENDED),
# then declares the session lost a session timeout later, and exits.
BROKER_EXIT_S = 2 * SESSION_TIMEOUT_MS / 1000 + 8.0
# A restarted server restores the sessions of its log and expires, a session timeout (and
# a tick) after it serves again, each one whose broker has not reconnected; that broker
# has declared it lost by its own clock sooner (SUSPENDED since the kill) and exits.
RESTORED_EXPIRY_S = SESSION_TIMEOUT_MS / 1000 + 1.0


def test_f21_paused_zookeeper_changes_nothing_and_brokers_exit_and_rejoin(
    cluster: FaultCluster, zookeeper: LocalZooKeeper, topic: str
) -> None:
    state = cluster.create_topic(topic)
    producer = AckedProducer(cluster, topic, "f21p")
    producer.send_many(10)
    zookeeper.pause()
    try:
        statuses = {
            broker_id: cluster.brokers[broker_id].wait_exit(BROKER_EXIT_S)
            for broker_id in BROKER_IDS
        }
    finally:
        zookeeper.resume()
    assert all(exited_on_session_loss(status) for status in statuses.values()), statuses
    during = cluster.state(topic)  # no broker runs: what the pause left
    assert during is not None
    assert (during.leader, during.leader_epoch, during.version) == (
        state.leader,
        state.leader_epoch,
        state.version,
    )
    cluster.heal()
    cluster.wait_in_sync(topic)
    producer.send_many(10)
    check_history(check_replicas_agree(cluster, topic), [producer])


def test_f21_killed_and_restarted_zookeeper_loses_nothing(
    cluster: FaultCluster, zookeeper: LocalZooKeeper, topic: str
) -> None:
    cluster.create_topic(topic)
    epochs = {b: info.broker_epoch for b, info in cluster.registered().items()}
    producer = AckedProducer(cluster, topic, "f21k")
    with TailingConsumer(cluster, topic) as consumer:
        with BackgroundProducer(producer) as background:
            wait_until(lambda: background.acknowledged_count() >= 10, "10 acknowledged writes")
            zookeeper.kill()
            zookeeper.restart()
            # Each broker kept its session, or has exited to rejoin. Until the restored
            # sessions' expiry, a registration with the old broker epoch does not tell the
            # one from a broker still trying to reconnect, which may yet exit.
            restored_expiry_s = time.monotonic() + RESTORED_EXPIRY_S
            wait_until(
                lambda: (
                    time.monotonic() >= restored_expiry_s
                    and all(_settled(cluster, b, epochs[b]) for b in BROKER_IDS)
                ),
                "every broker back on its session or exited",
                RESTORED_EXPIRY_S + EXPIRY_S,
            )
        for broker_id in BROKER_IDS:
            status = cluster.brokers[broker_id].exit_status()
            assert status is None or exited_on_session_loss(status), (broker_id, status)
        cluster.heal()
        cluster.wait_in_sync(topic)
        producer.send_many(10)
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])


def _settled(cluster: FaultCluster, broker_id: int, epoch: int) -> bool:
    broker = cluster.brokers[broker_id]
    if not broker.alive:
        return True
    info = cluster.registered().get(broker_id)
    return info is not None and info.broker_epoch == epoch
