"""A broker's side of partition states on a real ZooKeeper: role changes delivered in
zkVersion order on a thread of their own, the leader's conditional ISR write, and a
controlled shutdown that moves leadership away."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from zookeeper_support import FakeBroker, FakeBrokers, wait_until

from twinlog.engine.zookeeper.controlled_shutdown import request_controlled_shutdown
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.partition_roles import (
    IsrChangeLostError,
    PartitionRoles,
    change_isr,
)
from twinlog.engine.zookeeper.partition_state import (
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession


def created(session: ZooKeeperSession, topic: str, partitions: int) -> dict[int, PartitionState]:
    states = read_topic_partition_states(session, topic)
    return states if len(states) == partitions else {}


def start_cluster(
    brokers: FakeBrokers, data_dir: Path, ids: tuple[int, ...]
) -> tuple[FakeBroker, dict[int, FakeBroker], ZooKeeperMetadataStore]:
    """A controller-only session and registered brokers ``ids``."""
    controller = brokers.start(0, register=False)
    by_id = {broker_id: brokers.start(broker_id, control=False) for broker_id in ids}
    return controller, by_id, ZooKeeperMetadataStore(controller.session, data_dir, 1)


def test_change_isr_is_conditional_on_the_version_and_hands_back_the_fresh_state(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller, by_id, store = start_cluster(brokers, tmp_path / "data", (1, 2, 3))
        store.add_topic("t", 1, {}, replication_factor=3)
        state = wait_until(lambda: created(controller.session, "t", 1))[0]
        leader = by_id[state.leader].session
        shrunk = change_isr(leader, "t", 0, state.isr[:2], state.version)
        assert shrunk.isr == state.isr[:2] and shrunk.version == state.version + 1
        assert (shrunk.leader, shrunk.leader_epoch) == (state.leader, state.leader_epoch)
        assert read_partition_state(leader, "t", 0) == shrunk

        with pytest.raises(IsrChangeLostError, match="changed since version") as lost:
            change_isr(leader, "t", 0, state.isr, state.version)  # the version it no longer has
        assert lost.value.current == shrunk
        assert read_partition_state(leader, "t", 0) == shrunk  # nothing written
        with pytest.raises(ValueError, match="must hold the leader"):
            change_isr(leader, "t", 0, state.isr[1:], shrunk.version)


def test_roles_are_delivered_in_version_order_on_their_own_thread(
    zk_connect: str, tmp_path: Path
) -> None:
    delivered: list[tuple[str, int, int, str]] = []

    def on_change(topic: str, partition: int, state: PartitionState) -> None:
        delivered.append((topic, partition, state.version, threading.current_thread().name))

    first_reads: list[int] = []
    with FakeBrokers(zk_connect) as brokers:
        controller, by_id, store = start_cluster(brokers, tmp_path / "data", (1, 2))
        with PartitionRoles(
            by_id[1].session,
            1,
            on_change,
            full_read_interval_s=1.0,
            on_first_read=lambda: first_reads.append(len(delivered)),
        ) as roles:
            wait_until(lambda: first_reads, what="the first full read")
            store.add_topic("t", 2, {}, replication_factor=2)
            store.add_topic("other", 1, {})  # factor 1: one of the two brokers only
            states = wait_until(lambda: created(controller.session, "t", 2))
            wait_until(lambda: len(roles.states()) >= 2, what="both partitions of t")
            current = states[0]
            leader = next(m for m in current.isr if m.broker_id == current.leader)
            follower = next(m for m in current.isr if m.broker_id != current.leader)
            for isr in ((leader,), (leader, follower), (leader,)):  # shrink, expand, shrink
                current = change_isr(by_id[leader.broker_id].session, "t", 0, isr, current.version)
            wait_until(
                lambda: roles.states()[("t", 0)].version == current.version, what="last version"
            )
            other = wait_until(lambda: created(controller.session, "other", 1))[0]
            if 1 in other.replicas:
                wait_until(lambda: ("other", 0) in roles.states(), what="other-0 delivered")
        versions = [v for topic, partition, v, _ in delivered if (topic, partition) == ("t", 0)]
        assert len(first_reads) == 1, "the first full read is told of once, not each one"
        assert versions == sorted(set(versions)), "in order, never twice"
        assert versions[0] == 0 and versions[-1] == current.version == 3
        assert {name for *_, name in delivered} == {"twinlog-partition-roles-1"}
        ours = {(topic, partition) for topic, partition, *_ in delivered}
        assert (("other", 0) in ours) == (1 in other.replicas)


def test_read_now_returns_once_the_new_states_are_taken(zk_connect: str, tmp_path: Path) -> None:
    """A controlled shutdown's last step: the broker steps down before it closes. Full
    reads are ten minutes apart here, so only ``read_now`` (or a watch, too late for
    the check right after it) hands the changes over."""
    first_read = threading.Event()
    with FakeBrokers(zk_connect) as brokers:
        controller, by_id, store = start_cluster(brokers, tmp_path / "data", (1, 2))
        roles = PartitionRoles(
            by_id[1].session,
            1,
            lambda topic, partition, state: None,
            full_read_interval_s=600.0,
            on_first_read=first_read.set,
        )
        with roles:
            assert first_read.wait(10), "no first full read"
            store.add_topic("t", 1, {}, replication_factor=2)
            current = wait_until(lambda: created(controller.session, "t", 1))[0]
            leader = next(m for m in current.isr if m.broker_id == current.leader)
            follower = next(m for m in current.isr if m.broker_id != current.leader)
            for isr in ((leader,), (leader, follower)) * 3:
                current = change_isr(by_id[leader.broker_id].session, "t", 0, isr, current.version)
                assert roles.read_now(10)
                assert roles.states()[("t", 0)].version == current.version
        began = time.monotonic()
        assert roles.read_now(10) is False  # stopped: no read will come
        assert time.monotonic() - began < 1.0


def test_controlled_shutdown_moves_every_leadership_it_can(zk_connect: str, tmp_path: Path) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller, by_id, store = start_cluster(brokers, tmp_path / "data", (1, 2, 3))
        store.add_topic("t", 3, {}, replication_factor=2)
        store.add_topic("single", 3, {})  # factor 1: where broker 1 leads, it stays
        session = controller.session
        t_before = wait_until(lambda: created(session, "t", 3))
        single = wait_until(lambda: created(session, "single", 3))
        assert any(state.leader == 1 for state in t_before.values())

        left = request_controlled_shutdown(by_id[1].session, 1, timeout_ms=20_000)

        assert left == sorted(("single", p) for p, s in single.items() if s.leader == 1)
        for partition, state in read_topic_partition_states(session, "t").items():
            before = t_before[partition]
            assert state.leader != 1 and 1 not in state.isr_ids
            if before.leader == 1:
                assert state.leader_epoch == before.leader_epoch + 1
                assert state.leader == next(r for r in before.replicas if r != 1)


def test_roles_stop_and_call_on_lost_when_the_session_is_lost(zk_connect: str) -> None:
    lost_on: list[str] = []
    with FakeBrokers(zk_connect) as brokers:
        broker = brokers.start(1, control=False)
        roles = PartitionRoles(
            broker.session,
            1,
            lambda *_: None,
            on_lost=lambda: lost_on.append(threading.current_thread().name),
            full_read_interval_s=1.0,
        ).start()
        try:
            broker.end_session()
            wait_until(lambda: lost_on, what="on_lost")
            assert lost_on == ["twinlog-partition-roles-1"]
        finally:
            roles.close()


def test_a_state_is_published_to_the_isr_writer_only_once_the_partition_took_it(
    zk_connect: str, tmp_path: Path
) -> None:
    """The ISR writer writes conditionally on the version it reads from ``states()`` and then
    has the leader confirm what it wrote: were a state published before its delivery, a
    newer ISR could be confirmed and this older one confirmed over it afterwards."""
    seen_during_delivery: list[int | None] = []
    roles_holder: list[PartitionRoles] = []

    def on_change(topic: str, partition: int, state: PartitionState) -> None:
        published = roles_holder[0].states().get((topic, partition))
        seen_during_delivery.append(None if published is None else published.version)
        assert published is None or published.version < state.version

    with FakeBrokers(zk_connect) as brokers:
        controller, by_id, store = start_cluster(brokers, tmp_path / "data", (1, 2))
        roles = PartitionRoles(by_id[1].session, 1, on_change, full_read_interval_s=1.0)
        roles_holder.append(roles)
        with roles:
            store.add_topic("t", 1, {}, replication_factor=2)
            state = wait_until(lambda: created(controller.session, "t", 1))[0]
            wait_until(lambda: roles.states().get(("t", 0)), what="the first state")
            change_isr(by_id[state.leader].session, "t", 0, state.isr[:1], state.version)
            wait_until(
                lambda: (roles.states().get(("t", 0)) or state).version > state.version,
                what="the shrunk state",
            )
    assert seen_during_delivery[0] is None and len(seen_during_delivery) >= 2
    assert all(version is not None for version in seen_during_delivery[1:])


def test_topics_made_one_after_another_are_read_once_each_without_a_full_read(
    zk_connect: str, tmp_path: Path
) -> None:
    # A new topic used to read everything again (every partition state of this broker):
    # creating N topics one after another cost each broker reads growing with N squared.
    # With full reads out of the way (one at start, the next in ten minutes), the watches
    # alone find new topics, grown ones and one deleted and made again, and each state is
    # read about once.
    delivered: list[tuple[str, int, int]] = []
    first_reads: list[bool] = []
    with FakeBrokers(zk_connect) as brokers:
        controller, by_id, store = start_cluster(brokers, tmp_path / "data", (1, 2))
        client = by_id[1].session.client
        state_reads: list[str] = []
        children_reads: list[str] = []
        get_async, get_children_async = client.get_async, client.get_children_async

        def counted_get(path: str, *args: object, **kwargs: object) -> object:
            state_reads.append(path)
            return get_async(path, *args, **kwargs)

        def counted_children(path: str, *args: object, **kwargs: object) -> object:
            children_reads.append(path)
            return get_children_async(path, *args, **kwargs)

        client.get_async = counted_get  # type: ignore[method-assign]
        client.get_children_async = counted_children  # type: ignore[method-assign]
        with PartitionRoles(
            by_id[1].session,
            1,
            lambda topic, partition, state: delivered.append((topic, partition, state.version)),
            full_read_interval_s=600.0,
            on_first_read=lambda: first_reads.append(True),
        ) as roles:
            wait_until(lambda: first_reads, what="the first full read")
            topics = [f"t{number}" for number in range(8)]
            for topic in topics:
                store.add_topic(topic, 2, {}, replication_factor=2)
                wait_until(
                    lambda t=topic: {(t, 0), (t, 1)} <= roles.states().keys(),
                    what=f"{topic} delivered",
                )
            store.grow_topic("t0", 3)
            wait_until(lambda: ("t0", 2) in roles.states(), what="t0's new partition")
            store.remove_topic("t1")
            wait_until(lambda: not created(controller.session, "t1", 2), what="t1 gone")
            store.add_topic("t1", 2, {}, replication_factor=2)
            fresh = wait_until(lambda: created(controller.session, "t1", 2))
            wait_until(
                lambda: roles.states().get(("t1", 0)) == fresh[0], what="t1 made again, read"
            )
        assert first_reads == [True]
        reads = len([path for path in state_reads if path.endswith("/state")])
        # 19 partitions (8 topics of 2, one grown, one made again): each read once, and
        # again when a watch fires on a change (the controller writes a new state once).
        assert reads <= 19 * 3, state_reads
        # Each topic's partitions are listed a few times for its own changes (made, its
        # states created, grown, made again), not once more per topic made after it: t0,
        # the first, as often as t7, the last.
        listed = Counter(children_reads)
        assert all(listed[f"/topics/{topic}/partitions"] <= 6 for topic in topics), listed
        assert listed["/topics"] <= 2 + 10, listed  # the first read, then each change
