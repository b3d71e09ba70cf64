"""Partitions moved between brokers: how fast a new replica catches up by reassignment
(without and with a throttle), and what a rebalance that gives a new broker its share
costs (time, bytes, moves).

Each move is timed from the request (``reassign_partitions`` returns once the controller
took it) until ZooKeeper's state says it completed: the new replica copied everything,
joined the ISR, and the leaving one was dropped.
"""

from __future__ import annotations

import time
from typing import Any

from bench.cluster.catch_up import produce_mib, segment_bytes
from bench.cluster.cluster import BenchCluster
from bench.cluster.settings import MIB, BenchSettings
from bench.cluster.waiting import wait_for
from twinlog.engine.base.errors import NotLeaderOrFollowerError
from twinlog.engine.broker.reassignments import PartitionMove
from twinlog.rpc.client import Admin


def _leads(cluster: BenchCluster, topic: str, partition: int, broker_id: int) -> bool:
    """The broker ZooKeeper names leader has taken the role (it answers for the partition)."""
    with cluster.admin(broker_id) as client:
        try:
            client.list_offset(topic, partition, "latest")
        except NotLeaderOrFollowerError:
            return False
    return True


def _produce(
    cluster: BenchCluster, topic: str, partition: int, leader: int, settings: BenchSettings
) -> None:
    wait_for(
        f"broker {leader} leading {topic}-{partition}",
        lambda: _leads(cluster, topic, partition, leader),
        settings.phase_timeout_s,
    )
    produce_mib(cluster.brokers[leader].address, topic, settings, partition)


def _moved(cluster: BenchCluster, topic: str, partition: int, target: tuple[int, ...]) -> bool:
    state = cluster.state(topic, partition)
    return state is not None and state.replicas == target and not state.reassigning


def reassignment_catch_up(
    cluster: BenchCluster, topic: str, mib: int, throttle_bytes_per_s: int, settings: BenchSettings
) -> dict[str, Any]:
    """A one-replica partition of ``mib`` MiB moved to another broker: MiB/s of the copy."""
    sized = BenchSettings(catch_up_mib=mib, phase_timeout_s=settings.phase_timeout_s)
    # One replica, so what is timed is the new replica's copy alone.
    state = cluster.create_topic(topic, 1, 1, {"min.insync.replicas": "1"})[0]
    source = state.leader
    _produce(cluster, topic, 0, source, sized)
    copied_bytes = segment_bytes(cluster.partition_dir(source, topic, 0))
    target = next(b for b in sorted(cluster.brokers) if b != source)
    started_s = time.monotonic()
    with cluster.admin() as admin:
        (result,) = admin.reassign_partitions(
            [PartitionMove(topic, 0, (target,))], throttle_bytes_per_s, 30_000
        )
    assert result.error is None, result.error
    wait_for(
        f"{topic} moved to broker {target}",
        lambda: _moved(cluster, topic, 0, (target,)),
        settings.phase_timeout_s,
    )
    elapsed_s = time.monotonic() - started_s
    return {
        "bytes": copied_bytes,
        "throttle_bytes_per_s": throttle_bytes_per_s,
        "seconds": elapsed_s,
        "mib_per_s": copied_bytes / MIB / elapsed_s,
    }


def rebalance_with_a_new_broker(
    cluster: BenchCluster,
    bootstrap: str,
    topic: str,
    partitions: int,
    mib_per_partition: int,
    new_broker_id: int,
    settings: BenchSettings,
) -> dict[str, Any]:
    """``partitions`` partitions (replication factor 2) of ``mib_per_partition`` MiB each
    on three brokers; a fourth joins and ``cluster rebalance`` gives it its share."""
    sized = BenchSettings(catch_up_mib=mib_per_partition, phase_timeout_s=settings.phase_timeout_s)
    states = cluster.create_topic(topic, partitions, 2, {"min.insync.replicas": "1"})
    for partition, state in states.items():
        _produce(cluster, topic, partition, state.leader, sized)
    cluster.add_broker(new_broker_id)
    with Admin(bootstrap) as admin:
        plan = admin.plan_rebalance()
        copies = sum(move.copies for move in plan.moves)
        started_s = time.monotonic()
        results = admin.execute_plan(plan)
        assert all(r.error is None for r in results), [r.error for r in results]
        wait_for(
            "the rebalance completed",
            lambda: not admin.partition_reassignments(),
            settings.phase_timeout_s,
        )
        elapsed_s = time.monotonic() - started_s
    logs = cluster.brokers[new_broker_id].data_dir / "logs"
    received = sum(path.stat().st_size for path in logs.rglob("*.log"))  # data and journal
    return {
        "partitions": partitions,
        "mib_per_partition": mib_per_partition,
        "moves": len(plan.moves),
        "moves_copying": copies,
        "seconds": elapsed_s,
        "bytes_to_new_broker": received,
        "moves_of_the_topic": sum(move.topic == topic for move in plan.moves),
        "replicas_after": plan.replicas_after,
        "leaders_after": plan.leaders_after,
        "mib_per_s": received / MIB / elapsed_s if elapsed_s else 0.0,
    }
