"""A new broker joins a running cluster (one of this test's own) and a partition of a user
topic and the transaction coordinator's journal partition move to it under transactional
load, their leaders among the brokers that leave; then one of the old replicas is
SIGKILLed. No committed transaction is lost, torn or read twice, nothing aborted is read,
the replicas agree, and the broker left behind holds no copy."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_checks import (
    check_replicas_agree,
    holds_no_copy,
    partition_directory,
    read_topic,
    transaction_anomalies,
)
from cluster_faults import FaultCluster, wait_until
from cluster_workload import TransactionalWriter

from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Admin

pytestmark = [pytest.mark.slow, pytest.mark.crash]

NEW = 4
PARTITIONS = 2
MOVE_WAIT_S = 60.0
COMPLETION_WAIT_S = 30.0


@pytest.fixture()
def growing_cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[FaultCluster]:
    cluster = FaultCluster(
        tmp_path / "cluster", zookeeper.connect_string, uuid.uuid4().hex[:12], spare_ids=(NEW,)
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def test_a_user_partition_and_the_journal_move_to_a_new_broker_under_transactions(
    growing_cluster: FaultCluster,
) -> None:
    cluster = growing_cluster
    topic = "moved-" + uuid.uuid4().hex[:6]
    cluster.create_topic(topic, PARTITIONS)
    writers = [
        TransactionalWriter(
            cluster, topic, PARTITIONS, f"{topic}-w{n}", abort_ratio=0.2, rng=random.Random(n)
        )
        for n in range(2)
    ]
    for writer in writers:
        writer.start()
    try:
        wait_until(lambda: sum(w.committed_count() for w in writers) >= 10, "10 commits")
        cluster.add_broker(NEW)
        moves = {}
        for name in (topic, TXN_JOURNAL_TOPIC):
            state = cluster.wait_in_sync(name)
            # The new broker replaces the leader, and comes first: it leads once in sync.
            moves[(name, 0)] = (NEW, *[r for r in state.replicas if r != state.leader])
        leaving = {name: cluster.wait_in_sync(name).leader for name in (topic, TXN_JOURNAL_TOPIC)}
        committed_before = sum(w.committed_count() for w in writers)
        with Admin(cluster.bootstrap, **cluster.client_arguments()) as admin:
            assert all(r.error is None for r in admin.reassign_partitions(moves))
        for (name, partition), target in moves.items():
            moved = cluster.wait_state(
                name, lambda s, t=target: s.replicas == t and not s.reassigning, "moved",
                MOVE_WAIT_S, partition,
            )  # fmt: skip
            assert moved.leader == NEW, moved
        wait_until(
            lambda: sum(w.committed_count() for w in writers) >= committed_before + 10,
            "commits go on through the moved coordinator",
        )
        # One of the old replicas that stayed dies; the workload goes on.
        survivor = next(r for r in moves[(topic, 0)] if r != NEW)
        cluster.brokers[survivor].kill()
        committed_before = sum(w.committed_count() for w in writers)
        wait_until(
            lambda: sum(w.committed_count() for w in writers) >= committed_before + 5,
            "commits go on with an old replica dead",
        )
        cluster.heal()
        time.sleep(1.0)
    finally:
        for writer in writers:
            writer.stop()
    for name, broker_id in leaving.items():
        gone = partition_directory(cluster.brokers[broker_id].data_dir, name)
        wait_until(lambda g=gone: holds_no_copy(g), f"broker {broker_id} dropping {gone}")
    for partition in range(PARTITIONS):
        check_replicas_agree(cluster, topic, partition=partition)
    check_replicas_agree(cluster, TXN_JOURNAL_TOPIC)
    deadline_s = time.monotonic() + COMPLETION_WAIT_S
    while True:  # a decided commit's copy may still be on its way (retried each second)
        found = transaction_anomalies(read_topic(cluster, topic, PARTITIONS), writers)
        if not any(found.values()) or time.monotonic() >= deadline_s:
            break
        time.sleep(1.0)
    assert not any(found.values()), {k: v[:5] for k, v in found.items() if v}
    assert sum(w.committed_count() for w in writers) > 20
