"""Partition reassignment on real processes: a partition moves to other brokers while it
is written and read (its leader among those leaving), the new replica catches up and
joins the ISR, the leaving broker drops its copy, and nothing acknowledged is lost; a
throttled move shows its progress and is cancelled back to where it was."""

from __future__ import annotations

import json

import pytest
from cluster_checks import check_history, check_replicas_agree, holds_no_copy, partition_directory
from cluster_faults import FaultCluster, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer
from server_process import run_cli

from twinlog.engine.zookeeper.partition_state import PartitionState
from twinlog.rpc.client import Admin

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def _reassign(cluster: FaultCluster, topic: str, *target: str) -> str:
    arguments = ["partitions", "reassign", "--topic", topic, "--partition", "0", *target]
    arguments += ["--server", cluster.bootstrap]
    token = cluster.token()
    if token is not None:
        arguments += ["--token", token]
    done = run_cli(*arguments)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _two_replica_topic(cluster: FaultCluster, topic: str) -> PartitionState:
    with cluster.client(1, request_timeout_ms=20_000) as remote:
        remote.create_topic(topic, 1, {"replication.factor": "2"})
    return cluster.wait_state(topic, lambda s: len(s.isr) == 2, "both replicas in sync")


def test_a_partition_moves_off_its_leader_under_load_and_loses_nothing(
    cluster: FaultCluster, topic: str
) -> None:
    state = _two_replica_topic(cluster, topic)
    (newcomer,) = set(cluster.brokers) - set(state.replicas)
    leaving = state.leader
    staying = next(r for r in state.replicas if r != leaving)
    producer = AckedProducer(cluster, topic, "ra", value_bytes=200)
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        wait_until(lambda: background.acknowledged_count() >= 30, "30 acknowledged writes")
        out = _reassign(cluster, topic, "--replicas", f"{newcomer},{staying}", "--wait")
        assert out.splitlines()[0] == f"{topic}-0: moving to [{newcomer}, {staying}]", out
        assert out.splitlines()[-1] == f"{topic}-0: done", out
        moved = cluster.wait_state(topic, lambda s: not s.reassigning, "the reassignment completed")
        assert moved.replicas == (newcomer, staying)
        assert set(moved.isr_ids) == {newcomer, staying}
        assert moved.leader in (newcomer, staying) and moved.leader != leaving
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 10, "writes go on")
    gone = partition_directory(cluster.brokers[leaving].data_dir, topic)
    wait_until(lambda: holds_no_copy(gone), f"broker {leaving} removing {gone}")
    committed = check_replicas_agree(cluster, topic, replicas=(newcomer, staying))
    check_history(committed, [producer], [consumer])


def test_a_throttled_move_shows_its_progress_and_is_cancelled_back(
    cluster: FaultCluster, topic: str
) -> None:
    state = _two_replica_topic(cluster, topic)
    (newcomer,) = set(cluster.brokers) - set(state.replicas)
    producer = AckedProducer(cluster, topic, "rc", value_bytes=4000, incompressible=True)
    for _ in range(50):  # 200 kB: at 2 kB/s the new replica cannot catch up in the test
        producer.send()
    target = (newcomer, *state.replicas)
    with Admin(cluster.bootstrap, **cluster.client_arguments()) as admin:
        (result,) = admin.reassign_partitions({(topic, 0): target}, throttle_bytes_per_s=2048)
        assert result.error is None, result
        running = cluster.wait_state(topic, lambda s: s.reassigning, "the reassignment running")
        assert running.adding == (newcomer,) and running.removing == ()

        def progress_known() -> bool:
            listed = [r for r in admin.partition_reassignments() if r.topic == topic]
            return bool(listed and listed[0].progress and listed[0].progress[0].bytes_behind > 0)

        wait_until(progress_known, "the leader reporting the new replica's bytes behind")
        (listed,) = [r for r in admin.partition_reassignments() if r.topic == topic]
        assert (listed.original, listed.target) == (state.replicas, target)
        assert listed.throttle_bytes_per_s == 2048 and not listed.progress[0].in_sync
        listing = run_cli(
            "partitions", "reassignments", "--server", cluster.bootstrap, "--format", "json",
            *(["--token", cluster.token() or ""] if cluster.token() else []),
        )  # fmt: skip
        assert listing.returncode == 0, listing.stderr
        assert [r["adding"] for r in json.loads(listing.stdout) if r["topic"] == topic] == [
            [newcomer]
        ]
        (cancelled,) = admin.reassign_partitions({(topic, 0): None})
        assert cancelled.error is None, cancelled
    back = cluster.wait_state(topic, lambda s: not s.reassigning, "the move cancelled")
    assert back.replicas == state.replicas and newcomer not in back.isr_ids
    dropped = partition_directory(cluster.brokers[newcomer].data_dir, topic)
    wait_until(lambda: holds_no_copy(dropped), f"broker {newcomer} removing {dropped}")
    check_history(check_replicas_agree(cluster, topic, replicas=state.replicas), [producer])


def test_moves_that_cannot_be_are_refused_with_what_to_do(
    cluster: FaultCluster, topic: str
) -> None:
    state = _two_replica_topic(cluster, topic)
    with Admin(cluster.bootstrap, **cluster.client_arguments()) as admin:
        bad_broker, unknown_topic = admin.reassign_partitions(
            {(topic, 0): (state.replicas[0], 99), (topic + "-none", 0): (1,)}
        )
        (twice,) = admin.reassign_partitions({(topic, 0): (1, 1)})
        (no_move,) = admin.reassign_partitions({(topic, 0): None})
        (no_partition,) = admin.reassign_partitions({(topic, 7): (1,)})
    assert type(bad_broker.error).__name__ == "InvalidReplicaAssignmentError", bad_broker
    assert "[99] are not registered" in str(bad_broker.error)
    assert type(unknown_topic.error).__name__ == "UnknownTopicOrPartitionError", unknown_topic
    assert type(twice.error).__name__ == "InvalidReplicaAssignmentError", twice
    assert "twice" in str(twice.error)
    assert type(no_move.error).__name__ == "NoReassignmentInProgressError", no_move
    assert type(no_partition.error).__name__ == "UnknownTopicOrPartitionError", no_partition
    assert cluster.wait_state(topic, lambda s: True, "the state").replicas == state.replicas
