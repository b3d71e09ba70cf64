"""A consumer group on a real cluster (one ZooKeeper, three brokers): its coordinator is the
leader of its ``__consumer_offsets`` partition and moves with it. Two subscribed members
with auto-commit read a replication-factor-3 topic; the coordinator's broker is SIGKILLed
mid-run; the members find the new coordinator and go on as they were: membership is kept
in ``__consumer_offsets`` with the offsets, so no member loses its partitions, the group's
epoch does not move, and every record is read exactly once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import (
    BROKER_SETTINGS,
    LocalCluster,
    running_cluster,
    wait_for,
)

from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, offsets_partition_for
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.client import Admin, Consumer, Producer

pytestmark = [pytest.mark.slow, pytest.mark.crash]

GROUP = "cluster-readers"
PARTITIONS = 4
RECORDS = 200  # half before the coordinator's broker is killed, half after
OFFSETS_PARTITIONS = 4  # the broker default (offsets_partitions)


@pytest.fixture()
def cluster(tmp_path: Path, zookeeper: LocalZooKeeper) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path, zookeeper, settings=(*BROKER_SETTINGS, "group_heartbeat_interval_ms=300")
    ) as opened:
        yield opened


def produce(cluster: LocalCluster, numbers: range) -> None:
    with Producer(
        cluster.bootstrap, request_timeout_ms=10_000, **cluster.client_arguments()
    ) as producer:
        for number in numbers:
            producer.send("work", b"%d" % number, partition=number % PARTITIONS)
        producer.flush(timeout_ms=60_000)


def test_a_group_follows_its_coordinator_to_another_broker(cluster: LocalCluster) -> None:
    cluster.create_replicated_topic("work", PARTITIONS)
    bootstrap = cluster.bootstrap
    produce(cluster, range(RECORDS // 2))
    seen: list[bytes | None] = []
    held: dict[str, set[frozenset[int]]] = {}  # member -> every assignment it had
    current: dict[str, frozenset[int]] = {}  # member -> its assignment at its last poll
    lock = threading.Lock()
    stop = threading.Event()
    watching = threading.Event()  # set once both members settled
    errors: list[BaseException] = []

    def member() -> None:
        try:
            with Consumer(
                bootstrap,
                group_id=GROUP,
                auto_offset_reset="earliest",
                auto_commit_interval_ms=200,
                session_timeout_ms=6_000,
                request_timeout_ms=10_000,
                **cluster.client_arguments(),
            ) as consumer:
                consumer.subscribe(["work"])
                name = threading.current_thread().name
                while not stop.is_set():
                    values = [r.value for r in consumer.poll(timeout_ms=200)]
                    assigned = frozenset(tp.partition for tp in consumer.assignment())
                    with lock:
                        seen.extend(values)
                        current[name] = assigned
                        # Once settled, every assignment, until the stop: a member leaves
                        # only after the stop, so an assignment polled while it is not set
                        # came before any leave (the other member's, given all partitions
                        # once this one left, is no rebalance of the kill's).
                        if watching.is_set() and not stop.is_set():
                            held.setdefault(name, set()).add(assigned)
        except BaseException as error:  # reported by the test's thread
            errors.append(error)

    members = [threading.Thread(target=member, name=f"member-{n}") for n in range(2)]
    for thread in members:
        thread.start()
    try:
        wait_for("the first half read", lambda: len(set(seen)) >= RECORDS // 2, timeout_s=60)

        def split_in_two() -> dict[str, frozenset[int]] | None:
            with lock:
                parts = dict(current)
            halves = len(parts) == 2 and all(len(p) == PARTITIONS // 2 for p in parts.values())
            return parts if halves and not frozenset.intersection(*parts.values()) else None

        wait_for("both members settled on half the partitions each", split_in_two, 60)
        with lock:
            settled = dict(current)
            watching.set()
        offsets_partition = offsets_partition_for(GROUP, OFFSETS_PARTITIONS).partition
        state = cluster.partition_state(OFFSETS_TOPIC, offsets_partition)
        assert state is not None
        with Admin(bootstrap, **cluster.client_arguments()) as admin:
            epoch_before = admin.describe_group(GROUP).group_epoch
        cluster.kill(state.leader)  # the group's coordinator
        cluster.wait_for_new_leader(OFFSETS_TOPIC, offsets_partition, state, timeout_s=30)
        produce(cluster, range(RECORDS // 2, RECORDS))
        wanted = {b"%d" % n for n in range(RECORDS)}
        wait_for("every record read", lambda: wanted <= set(seen), timeout_s=90)
        with Admin(cluster.bootstrap, **cluster.client_arguments()) as admin:
            description = wait_for(
                "both members at the new coordinator",
                lambda: (
                    (d := admin.describe_group(GROUP)).state == "stable"
                    and len(d.members) == 2
                    and d
                ),
                timeout_s=60,
            )
        assert description.group_epoch == epoch_before  # no rebalance: nobody moved
    finally:
        stop.set()
        for thread in members:
            thread.join(timeout=60)
    assert not errors, errors
    # From the kill on, each member held exactly the partitions it had settled on.
    assert {name: sets for name, sets in held.items()} == {
        name: {partitions} for name, partitions in settled.items()
    }, (held, settled)
    assert len(seen) == RECORDS == len(set(seen)), sorted(
        value for value in set(seen) if seen.count(value) > 1
    )  # every record exactly once
