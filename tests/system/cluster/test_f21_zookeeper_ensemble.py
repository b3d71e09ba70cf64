"""F21, the ensemble: three ZooKeeper servers, and the one leading ZAB is SIGKILLed while
the brokers write. The other two elect a leader; every broker keeps its session (same
broker epoch, still running), writes go on, and nothing is lost. It has brokers of its
own, on the ensemble (the folder's shared cluster uses a standalone server)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import BROKER_IDS, FaultCluster, wait_until
from cluster_workload import AckedProducer, BackgroundProducer
from zookeeper_ensemble import ZooKeeperEnsemble

pytestmark = [pytest.mark.slow, pytest.mark.crash]

# Followers notice a dead ZAB leader after syncLimit ticks, then elect; each try to reach
# the dead server's election port may wait out cnxTimeout (5 s). Seconds when idle, but a
# full suite once took over 30 s on two busy cores: the wait ends when a leader appears.
ZAB_ELECTION_S = 60.0


@pytest.fixture()
def ensemble_cluster(tmp_path: Path) -> Iterator[tuple[ZooKeeperEnsemble, FaultCluster]]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the cluster tests need Java 17")
    with ZooKeeperEnsemble(tmp_path / "zookeeper") as ensemble:
        cluster = FaultCluster(tmp_path / "cluster", ensemble.hosts, uuid.uuid4().hex[:12])
        try:
            cluster.start()
            yield ensemble, cluster
        except BaseException:
            print(cluster.dump_logs())
            raise
        finally:
            cluster.close()


def test_f21_ensemble_leader_killed_sessions_survive_and_writes_go_on(
    ensemble_cluster: tuple[ZooKeeperEnsemble, FaultCluster],
) -> None:
    ensemble, cluster = ensemble_cluster
    topic = f"f21e-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic)
    epochs = {b: info.broker_epoch for b, info in cluster.registered().items()}
    producer = AckedProducer(cluster, topic, "f21e")
    with BackgroundProducer(producer) as background:
        wait_until(lambda: background.acknowledged_count() >= 10, "10 acknowledged writes")
        killed = wait_until(ensemble.leader, "a ZAB leader")
        ensemble.kill(killed)
        wait_until(
            lambda: (now := ensemble.leader()) is not None and now != killed,
            "a new ZAB leader",
            ZAB_ELECTION_S,
        )
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 10, "writes go on")
    assert all(cluster.brokers[b].alive for b in BROKER_IDS), cluster.dump_logs()
    assert {b: i.broker_epoch for b, i in cluster.registered().items()} == epochs
    check_history(check_replicas_agree(cluster, topic), [producer])
