"""``twinlog cluster rebalance`` and ``decommission`` on real processes (a cluster of this
test's own: a decommission leaves it a broker short). A broker holding nothing gets its
share of a topic's partitions; then a broker is emptied under load and stops with a
controlled shutdown, with nothing acknowledged lost, and the clean stop is final."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import FaultCluster, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer
from server_process import run_cli

from twinlog.engine.zookeeper.partition_state import read_topic_partition_states
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Admin

pytestmark = [pytest.mark.slow, pytest.mark.crash]

SPREAD_PARTITIONS = 6


@pytest.fixture()
def own_cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[FaultCluster]:
    cluster = FaultCluster(tmp_path / "cluster", zookeeper.connect_string, uuid.uuid4().hex[:12])
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def _cli(cluster: FaultCluster, *arguments: str) -> str:
    token = cluster.token()
    done = run_cli(
        *arguments, "--server", cluster.bootstrap, *(["--token", token] if token else [])
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _replicas(cluster: FaultCluster, topic: str) -> dict[int, tuple[int, ...]]:
    states = read_topic_partition_states(cluster.session, topic)
    return {partition: state.replicas for partition, state in states.items()}


def test_a_broker_gets_its_share_and_a_decommissioned_one_is_emptied_and_stops(
    own_cluster: FaultCluster,
) -> None:
    cluster = own_cluster
    with cluster.client(1, request_timeout_ms=20_000) as remote:
        remote.create_topic("spread", SPREAD_PARTITIONS, {"replication.factor": "1"})
    wait_until(lambda: len(_replicas(cluster, "spread")) == SPREAD_PARTITIONS, "the states")
    with Admin(cluster.bootstrap, **cluster.client_arguments()) as admin:
        moves = {("spread", p): (1,) for p in range(SPREAD_PARTITIONS)}  # all on broker 1
        assert all(r.error is None for r in admin.reassign_partitions(moves))
        wait_until(lambda: not admin.partition_reassignments(), "every partition on broker 1")
    assert set(_replicas(cluster, "spread").values()) == {(1,)}

    plan = json.loads(_cli(cluster, "cluster", "rebalance", "--dry-run", "--format", "json"))
    spread_moves = [m for m in plan["moves"] if m["topic"] == "spread"]
    assert len(spread_moves) == 4  # brokers 2 and 3 get two partitions each
    assert set(_replicas(cluster, "spread").values()) == {(1,)}  # a dry run moved nothing
    out = _cli(cluster, "cluster", "rebalance", "--execute", "--wait")
    assert out.splitlines()[-1].endswith(": done"), out
    holders = [replicas[0] for replicas in _replicas(cluster, "spread").values()]
    assert sorted(holders.count(b) for b in (1, 2, 3)) == [2, 2, 2], holders

    topic = "moving-" + uuid.uuid4().hex[:6]
    state = cluster.create_topic(topic)  # replication factor 3: every broker
    producer = AckedProducer(cluster, topic, "dc", value_bytes=100)
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        wait_until(lambda: background.acknowledged_count() >= 20, "20 acknowledged writes")
        out = _cli(cluster, "cluster", "decommission", "--broker-id", "3")
        assert out.splitlines()[-1] == (
            "broker 3 holds no replica and is stopping (controlled shutdown)"
        ), out
        wait_until(lambda: not cluster.brokers[3].alive, "broker 3 to stop")
        assert cluster.brokers[3].exit_status() == 0  # a clean stop, asked of it
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 10, "writes go on")
    for name in (topic, "spread", "__txn_journal", "__consumer_offsets"):
        for partition, replicas in _replicas(cluster, name).items():
            assert 3 not in replicas, (name, partition, replicas)
    moved = cluster.wait_state(topic, lambda s: set(s.isr_ids) == {1, 2}, "ISR [1, 2]")
    assert moved.replicas != state.replicas and len(moved.replicas) == 2
    committed = check_replicas_agree(cluster, topic, replicas=(1, 2))
    check_history(committed, [producer], [consumer])
