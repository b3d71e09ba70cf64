"""The controller on a real ZooKeeper, with sessions standing for brokers: one elected,
another elected with the next epoch when it dies, a deposed one writing nothing, topics
given partition states, leaders moved from the ISR only."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import pytest
from zookeeper_support import FakeBrokers, wait_until

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.controller import Controller
from twinlog.engine.zookeeper.controller_epoch import (
    ControllerFencedError,
    FencedWriter,
    SetData,
    read_controller,
    read_controller_epoch,
    try_to_become_controller,
)
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.partition_roles import change_isr
from twinlog.engine.zookeeper.partition_state import (
    NO_LEADER,
    IsrMember,
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.session import ZooKeeperSession


def states_of(session: ZooKeeperSession, topic: str, partitions: int) -> dict[int, PartitionState]:
    """The topic's states once all ``partitions`` exist, else {} (for wait_until)."""
    states = read_topic_partition_states(session, topic)
    return states if len(states) == partitions else {}


def test_one_controller_among_three_and_the_next_epoch_when_it_dies(zk_connect: str) -> None:
    with FakeBrokers(zk_connect) as brokers:
        for broker_id in (1, 2, 3):
            brokers.start(broker_id)
        first = wait_until(brokers.controllers, what="a controller")
        assert len(first) == 1
        winner = first[0]
        assert winner.controller is not None and winner.controller.seat is not None
        assert winner.controller.seat.epoch == 1
        observer = brokers.started[0] if winner is not brokers.started[0] else brokers.started[1]
        holder = read_controller(observer.session)
        assert holder is not None and holder[:2] == (winner.broker_id, 1)
        assert read_controller_epoch(observer.session)[0] == 1

        winner.end_session()  # /controller goes with it, the others race
        assert wait_until(lambda: winner.lost_calls == 1, what="on_lost called")
        # on_lost comes from the session's listener, the step-down from the controller's
        # thread it wakes: soon after, not before
        controller = winner.controller
        assert controller is not None
        assert wait_until(lambda: not controller.active, what="the lost controller stepped down")
        second = wait_until(brokers.controllers, what="a new controller")
        assert len(second) == 1 and second[0] is not winner
        assert second[0].controller is not None and second[0].controller.seat is not None
        assert second[0].controller.seat.epoch == 2
        assert read_controller_epoch(observer.session)[0] == 2


def test_a_deposed_controllers_write_fails_as_a_whole(
    zk_connect: str, session: ZooKeeperSession
) -> None:
    with ZooKeeperSession(zk_connect) as a_session:
        seat = try_to_become_controller(a_session, 1)
        assert seat is not None and seat.epoch == 1
        assert try_to_become_controller(session, 2) is None  # /controller is taken
        session.client.create("/x", b"before")
        session.client.create("/y", b"before")
        writer = FencedWriter(a_session, seat)
        writer.commit([SetData("/x", b"by A", 0)])  # A is controller: applied
        # Another controller is elected meanwhile: it bumps /controller_epoch.
        _epoch, version = read_controller_epoch(session)
        session.client.set(znodes.CONTROLLER_EPOCH, znodes.encode({"controller_epoch": 2}), version)
        with pytest.raises(ControllerFencedError, match="another broker is controller"):
            writer.commit([SetData("/x", b"by deposed A", 1), SetData("/y", b"by deposed A", 0)])
        assert session.client.get("/x")[0] == b"by A"
        assert session.client.get("/y")[0] == b"before"


def test_a_controller_whose_epoch_moved_steps_down_and_wins_again_with_a_new_epoch(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        a = brokers.start(1)
        assert a.controller is not None
        wait_until(lambda: a.controller is not None and a.controller.active, what="A elected")
        epoch, version = read_controller_epoch(a.session)
        a.session.client.set(
            znodes.CONTROLLER_EPOCH, znodes.encode({"controller_epoch": epoch + 1}), version
        )
        store = ZooKeeperMetadataStore(a.session, tmp_path / "data", 1)
        store.add_topic("t", 1, {})  # A's next write is refused; it steps down, races again
        states = wait_until(lambda: states_of(a.session, "t", 1), what="t's state")
        assert states[0].controller_epoch == epoch + 2
        seat = a.controller.seat
        assert seat is not None and seat.epoch == epoch + 2


def test_topic_creation_assigns_consecutive_replicas_and_refuses_a_factor_above_the_live_count(
    zk_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="twinlog.controller")
    with FakeBrokers(zk_connect) as brokers:
        # Registered out of order (the assignment goes by id); the controller (1) starts
        # last, so its first pass already sees every broker: a pass that read the broker
        # list before 2 registered could otherwise create the topic on 1 and 3 alone.
        for broker_id in (3, 2, 1):
            brokers.start(broker_id, control=broker_id == 1)
        store = ZooKeeperMetadataStore(brokers.started[0].session, tmp_path / "data", 1)
        store.add_topic("orders", 4, {}, replication_factor=2)
        session = brokers.started[0].session
        states = wait_until(lambda: states_of(session, "orders", 4), what="4 states")
        epochs = {b.broker_id: b.epoch for b in brokers.started}
        start = zlib.crc32(b"orders") % 3
        for partition, state in states.items():
            first = [1, 2, 3][(start + partition) % 3]
            second = [1, 2, 3][(start + partition + 1) % 3]
            assert state.replicas == (first, second)
            assert (state.leader, state.leader_epoch, state.controller_epoch) == (first, 0, 1)
            assert state.isr == (IsrMember(first, epochs[first]), IsrMember(second, epochs[second]))
        assert store.get_topic("orders").partitions == 4
        with pytest.raises(InvalidConfigError, match="replication factor 4 is larger than the 3"):
            store.add_topic("wide", 1, {}, replication_factor=4)
        with pytest.raises(InvalidConfigError, match="replication_factor"):
            store.add_topic("none", 1, {}, replication_factor=0)
    assert "partition orders-0 created" in caplog.text


def test_a_dead_leader_is_replaced_from_the_isr_and_leaves_it(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller = brokers.start(0, register=False)  # controller only, no replicas
        by_id = {broker_id: brokers.start(broker_id, control=False) for broker_id in (1, 2, 3)}
        session = controller.session
        store = ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        store.add_topic("t", 1, {}, replication_factor=3)
        before = wait_until(lambda: states_of(session, "t", 1), what="t's state")[0]
        by_id[before.leader].close()

        def moved() -> PartitionState | None:
            state = read_partition_state(session, "t", 0)
            return state if state is not None and state.leader != before.leader else None

        after = wait_until(moved, what="a new leader")
        assert after.leader == before.replicas[1]  # the next in assignment order
        assert after.leader_epoch == before.leader_epoch + 1
        assert before.leader not in after.isr_ids and len(after.isr) == 2
        assert after.replicas == before.replicas


def test_with_every_isr_member_gone_the_partition_is_offline_until_the_last_one_returns(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller = brokers.start(0, register=False)
        by_id = {broker_id: brokers.start(broker_id, control=False) for broker_id in (1, 2)}
        session = controller.session
        ZooKeeperMetadataStore(session, tmp_path / "data", 1).add_topic(
            "t", 1, {}, replication_factor=2
        )
        first = wait_until(lambda: states_of(session, "t", 1), what="t's state")[0]
        leader, follower = first.leader, first.replicas[1]
        by_id[follower].close()
        wait_until(lambda: read_partition_state(session, "t", 0).isr_ids == (leader,))  # type: ignore[union-attr]
        by_id[leader].close()

        def offline() -> PartitionState | None:
            state = read_partition_state(session, "t", 0)
            return state if state is not None and state.offline else None

        gone = wait_until(offline, what="offline")
        assert gone.leader == NO_LEADER and gone.leader_epoch == first.leader_epoch + 1
        assert gone.isr_ids == (leader,)  # the last member is kept for a clean election

        # The follower (not in the ISR) returns: no unclean election.
        assert controller.controller is not None
        passes = controller.controller.passes
        brokers.start(follower, control=False)
        wait_until(lambda: controller.controller.passes >= passes + 2, what="two passes")  # type: ignore[union-attr]
        assert read_partition_state(session, "t", 0) == gone
        returned = brokers.start(leader, control=False)

        def led() -> PartitionState | None:
            state = read_partition_state(session, "t", 0)
            return state if state is not None and not state.offline else None

        back = wait_until(led, what="leader again")
        assert back.leader == leader and back.leader_epoch == gone.leader_epoch + 1
        assert back.isr == (IsrMember(leader, returned.epoch),)  # with its new broker epoch


def test_the_changes_of_one_event_go_in_as_few_multis_as_fit(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller = brokers.start(0, register=False)
        by_id = {broker_id: brokers.start(broker_id, control=False) for broker_id in (1, 2, 3)}
        session = controller.session
        assert controller.controller is not None
        wait_until(lambda: controller.controller is not None and controller.controller.active)
        store = ZooKeeperMetadataStore(session, tmp_path / "data", 1)
        store.add_topic("t", 60, {}, replication_factor=2)  # 1 + 60 * 2 creates: two multis
        before = wait_until(lambda: states_of(session, "t", 60), what="60 states")
        wait_until(lambda: controller.controller.multis >= 2)  # type: ignore[union-attr]
        assert controller.controller.multis == 2
        led = [p for p, state in before.items() if state.leader == 1]
        in_isr = [p for p, state in before.items() if 1 in state.isr_ids]
        assert led and len(in_isr) > len(led)
        by_id[1].close()

        def all_moved() -> dict[int, PartitionState]:
            states = read_topic_partition_states(session, "t")
            return states if all(1 not in s.isr_ids for s in states.values()) else {}

        after = wait_until(all_moved, what="broker 1 out of every ISR")
        wait_until(lambda: controller.controller.multis >= 3)  # type: ignore[union-attr]
        assert controller.controller.multis == 3  # one event, 40 changes, one multi
        for partition in led:
            assert after[partition].leader_epoch == before[partition].leader_epoch + 1


def test_passes_woken_by_watches_read_what_changed_and_decide_from_fresh_isrs(
    zk_connect: str, tmp_path: Path
) -> None:
    # Each pass used to read every partition state: topics made one after another cost
    # reads growing with the square of the topics. With the full pass ten minutes away,
    # the watches alone make new topics' states, a grown topic's new one, and a new leader
    # when one dies; and the ISR a leader shrank behind the controller's back is read
    # again before the controller elects from it.
    with FakeBrokers(zk_connect) as brokers:
        seat_holder = brokers.start(0, register=False, control=False)
        by_id = {broker_id: brokers.start(broker_id, control=False) for broker_id in (1, 2, 3)}
        session = seat_holder.session
        state_reads: list[str] = []
        get_async = session.client.get_async

        def counted(path: str, *args: object, **kwargs: object) -> object:
            if path.endswith("/state"):
                state_reads.append(path)
            return get_async(path, *args, **kwargs)

        session.client.get_async = counted  # type: ignore[method-assign]
        controller = Controller(session, 0, full_read_interval_s=600.0).start()
        try:
            store = ZooKeeperMetadataStore(session, tmp_path / "data", 1)
            topics = [f"t{number}" for number in range(8)]
            for topic in topics:
                store.add_topic(topic, 3, {}, replication_factor=3)
                wait_until(lambda t=topic: states_of(session, t, 3), what=f"{topic}'s states")
            store.grow_topic("t0", 4)
            wait_until(lambda: states_of(session, "t0", 4), what="t0's new partition")
            made_reads = len(state_reads)

            before = states_of(session, "t1", 3)[0]
            kept = [m for m in before.isr if m.broker_id != before.replicas[1]]
            shrunk = change_isr(by_id[before.leader].session, "t1", 0, tuple(kept), before.version)
            by_id[before.leader].close()

            def moved() -> PartitionState | None:
                state = read_partition_state(session, "t1", 0)
                return state if state is not None and state.leader != before.leader else None

            after = wait_until(moved, what="a new leader for t1-0")
        finally:
            controller.close()
        # From the ISR the leader left (the next replica was out of it), not the older one.
        assert after.leader == before.replicas[2] and after.leader in shrunk.isr_ids
        # 25 partitions made: their states read about once each (the test's own reads go
        # through the same client and are counted too), not once per topic made after
        # (which read 3 + 6 + ... + 24 = 108 for the first eight topics alone).
        assert made_reads <= 25 * 2, made_reads
