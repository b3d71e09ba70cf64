"""Preferred leaders on a real ZooKeeper, with sessions standing for brokers: an operator's
request leads a partition by its first replica again, or says why not; the controller
does it by itself when a broker leads too few of its partitions; a request no controller
carried out stays for the next one."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from zookeeper_support import FakeBroker, FakeBrokers, wait_until

from twinlog.engine.broker.leader_elections import ElectionOutcome
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.metadata_store import ZooKeeperMetadataStore
from twinlog.engine.zookeeper.partition_state import (
    IsrMember,
    PartitionState,
    read_partition_state,
    read_topic_partition_states,
)
from twinlog.engine.zookeeper.preferred_election import request_preferred_election
from twinlog.engine.zookeeper.session import ZooKeeperSession

AUTO_OFF = {"auto_leader_rebalance": False}


def _controller_and_three_brokers(brokers: FakeBrokers, **options: Any) -> FakeBroker:
    """A controller (not a replica, with ``options``) and brokers 1, 2 and 3."""
    controller = brokers.start(0, register=False, **options)
    for broker_id in (1, 2, 3):
        brokers.start(broker_id, control=False)
    return controller


def _topic(session: ZooKeeperSession, tmp_path: Path, topic: str, partitions: int) -> None:
    ZooKeeperMetadataStore(session, tmp_path / "data", 1).add_topic(
        topic, partitions, {}, replication_factor=3
    )

    def created() -> dict[int, PartitionState]:
        states = read_topic_partition_states(session, topic)
        return states if len(states) == partitions else {}

    wait_until(created, what=f"{topic}'s states")


def _lead_elsewhere(
    session: ZooKeeperSession, topic: str, partition: int, *, drop_preferred: bool = False
) -> PartitionState:
    """As a past failover left it: led by the second replica, the first still in sync
    (``drop_preferred``: out of the ISR)."""
    state = read_partition_state(session, topic, partition)
    assert state is not None
    isr = state.isr
    if drop_preferred:
        isr = tuple(member for member in isr if member.broker_id != state.replicas[0])
    moved = replace(state, leader=state.replicas[1], leader_epoch=state.leader_epoch + 1, isr=isr)
    path = znodes.partition_state_path(topic, partition)
    session.client.set(path, moved.encode(), version=state.version)
    after = read_partition_state(session, topic, partition)
    assert after is not None
    return after


def test_an_asked_election_leads_by_the_first_replica_or_says_why_not(
    zk_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller = _controller_and_three_brokers(brokers, **AUTO_OFF)
        session = controller.session
        _topic(session, tmp_path, "t", 3)
        moved = _lead_elsewhere(session, "t", 0)
        unable = _lead_elsewhere(session, "t", 1, drop_preferred=True)
        _passes(controller, 2)
        assert read_partition_state(session, "t", 0) == moved  # automatic moves are off
        with caplog.at_level(logging.INFO, "twinlog.controller"):
            results = request_preferred_election(
                session, [("t", 0), ("t", 1), ("t", 2), ("t", 9)], timeout_ms=20_000
            )
        assert [r.outcome for r in results] == [
            ElectionOutcome.ELECTED,
            ElectionOutcome.NOT_AVAILABLE,
            ElectionOutcome.NOT_NEEDED,
            ElectionOutcome.UNKNOWN_PARTITION,
        ]
        after = read_partition_state(session, "t", 0)
        assert after is not None
        assert after.leader == moved.replicas[0] == results[0].leader
        assert after.leader_epoch == moved.leader_epoch + 1 and after.isr == moved.isr
        assert f"broker {unable.replicas[0]}, is not in the ISR" in results[1].message
        assert read_partition_state(session, "t", 1) == unable  # untouched
        assert session.client.exists(znodes.PREFERRED_ELECTION) is None  # carried out
    assert "preferred leader (asked)" in caplog.text
    assert "preferred leader election asked for 3 partitions carried out" in caplog.text


def test_the_controller_moves_leaders_back_when_a_broker_leads_too_few_of_its_own(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        controller = _controller_and_three_brokers(
            brokers, leader_imbalance_percentage=10, leader_imbalance_check_interval_s=0.5
        )
        session = controller.session
        _topic(session, tmp_path, "t", 3)
        moved = _lead_elsewhere(session, "t", 0)

        def back() -> PartitionState | None:
            state = read_partition_state(session, "t", 0)
            return state if state is not None and state.leader == moved.replicas[0] else None

        after = wait_until(back, what="leadership back with its preferred leader", timeout_s=20)
        assert after.leader_epoch == moved.leader_epoch + 1


def test_no_automatic_move_at_or_below_the_threshold(zk_connect: str, tmp_path: Path) -> None:
    """Broker 1 is the preferred leader of ten partitions and leads nine: 10 % not led is
    not above ``leader_imbalance_percentage`` 10, so nothing moves."""
    with FakeBrokers(zk_connect) as brokers:
        controller = brokers.start(
            0, register=False, leader_imbalance_percentage=10, leader_imbalance_check_interval_s=0.2
        )
        brokers.start(1, control=False)
        session = controller.session
        ZooKeeperMetadataStore(session, tmp_path / "data", 1).add_topic(
            "one", 10, {}, replication_factor=1
        )
        wait_until(lambda: len(read_topic_partition_states(session, "one")) == 10)
        second = brokers.start(2, control=False)  # after: every partition is on broker 1
        state = read_partition_state(session, "one", 0)
        assert state is not None and state.replicas == (1,)
        # As a reassignment would leave it: replicas (1, 2), both in sync, 2 leading.
        led_by_two = replace(
            state,
            replicas=(1, 2),
            leader=2,
            leader_epoch=state.leader_epoch + 1,
            isr=(*state.isr, IsrMember(2, second.epoch)),
        )
        path = znodes.partition_state_path("one", 0)
        session.client.set(path, led_by_two.encode(), state.version)
        _passes(controller, 3)
        after = read_partition_state(session, "one", 0)
        assert after is not None and after.leader == 2


def _passes(broker: FakeBroker, count: int) -> None:
    """Wait until its controller made ``count`` more passes (each reads and decides)."""
    controller = broker.controller
    assert controller is not None
    start = controller.passes
    wait_until(lambda: controller.passes >= start + count, what=f"{count} passes")


def test_a_request_no_controller_carried_out_stays_for_the_next_one(
    zk_connect: str, tmp_path: Path
) -> None:
    with FakeBrokers(zk_connect) as brokers:
        first = _controller_and_three_brokers(brokers, **AUTO_OFF)
        session = first.session
        _topic(session, tmp_path, "t", 1)
        first.close()  # no controller now
        asker = brokers.start(1, register=False, control=False)
        moved = _lead_elsewhere(asker.session, "t", 0)
        results = request_preferred_election(asker.session, [("t", 0)], timeout_ms=500)
        assert [r.outcome for r in results] == [ElectionOutcome.TIMED_OUT]
        assert "the next controller carries it out" in results[0].message
        assert asker.session.client.exists(znodes.PREFERRED_ELECTION) is not None
        brokers.start(9, register=False, **AUTO_OFF)  # a controller again

        def carried_out() -> PartitionState | None:
            state = read_partition_state(asker.session, "t", 0)
            return state if state is not None and state.leader == moved.replicas[0] else None

        wait_until(carried_out, what="the waiting request carried out", timeout_s=20)
        wait_until(lambda: asker.session.client.exists(znodes.PREFERRED_ELECTION) is None)
