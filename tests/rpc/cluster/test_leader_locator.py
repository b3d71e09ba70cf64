"""The coordination client's locator on a real ZooKeeper: live leaders and their epochs
from the partition states, coordinators from ``__txn_journal``, a cache refreshed when
asked or when old, and an unreadable ZooKeeper answered from the cache or not at all."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.broker_registration import register_broker
from twinlog.engine.zookeeper.partition_state import IsrMember, PartitionState
from twinlog.engine.zookeeper.session import ZooKeeperSession
from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper
from twinlog.rpc.cluster.leader_locator import ZooKeeperLeaderLocator
from twinlog.rpc.replication.coordination_locator import GONE, Location

pytestmark = pytest.mark.slow  # a real ZooKeeper (a JVM) starts first

LIVE = 2  # registered
DEAD = 5  # named as leader, not registered
ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the ZooKeeper tests need Java 17")
    scratch: Path = tmp_path_factory.mktemp("zookeeper")
    with LocalZooKeeper(scratch, tick_time_ms=500) as server:
        yield server


@pytest.fixture()
def zk_connect(zookeeper: LocalZooKeeper) -> str:
    return f"{zookeeper.connect_string}/twinlog/{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def session(zk_connect: str) -> Iterator[ZooKeeperSession]:
    with ZooKeeperSession(zk_connect, session_timeout_ms=4000) as opened:
        register_broker(opened, LIVE, "127.0.0.1", 9092, "d" * 32)
        yield opened


def write_topic(session: ZooKeeperSession, topic: str, states: dict[int, PartitionState]) -> None:
    client = session.client
    client.create(
        znodes.topic_path(topic),
        znodes.encode({"id": uuid.uuid4().hex, "partitions": len(states), "config": {}}),
        makepath=True,
    )
    for partition, state in states.items():
        write_state(session, topic, partition, state)


def write_state(
    session: ZooKeeperSession, topic: str, partition: int, state: PartitionState
) -> None:
    path = znodes.partition_state_path(topic, partition)
    if session.client.exists(path):
        session.client.set(path, state.encode())
    else:
        session.client.create(path, state.encode(), makepath=True)


def led_by(leader: int, epoch: int) -> PartitionState:
    return PartitionState(leader, epoch, (IsrMember(leader, 1),), (leader,), 1)


def test_live_leaders_their_epochs_and_partitions_that_do_not_exist(
    session: ZooKeeperSession,
) -> None:
    write_topic(session, "orders", {0: led_by(LIVE, 3), 1: led_by(DEAD, 7)})
    locator = ZooKeeperLeaderLocator(session)
    assert locator.partition_leader(ORDERS_0) == Location(LIVE, 3)
    assert locator.partition_leader(ORDERS_1) is None  # its leader is not registered
    assert locator.partition_leader(TopicPartition("orders", 2)) is GONE  # no such partition
    missing = locator.partition_leader(TopicPartition("missing", 0))
    assert missing is not None and missing.gone


def test_coordinator_n_is_the_live_leader_of_the_journal_partition_n(
    session: ZooKeeperSession,
) -> None:
    locator = ZooKeeperLeaderLocator(session)
    assert locator.coordinator(0) is None  # no __txn_journal yet: no coordinator anywhere
    client = session.client
    client.create(
        znodes.topic_path(TXN_JOURNAL_TOPIC),
        znodes.encode({"id": uuid.uuid4().hex, "partitions": 3, "config": {}}),
        makepath=True,
    )
    write_state(session, TXN_JOURNAL_TOPIC, 0, led_by(LIVE, 2))
    write_state(session, TXN_JOURNAL_TOPIC, 1, led_by(DEAD, 2))  # partition 2: no state yet
    assert locator.coordinator(0, refresh=True) == LIVE
    assert locator.coordinator(1) is None
    assert locator.coordinator(2) is None


def test_the_cache_is_read_again_when_asked_or_when_old(session: ZooKeeperSession) -> None:
    write_topic(session, "orders", {0: led_by(LIVE, 3)})
    cached = ZooKeeperLeaderLocator(session, max_age_s=3600)
    always = ZooKeeperLeaderLocator(session, max_age_s=0)
    assert cached.partition_leader(ORDERS_0) == always.partition_leader(ORDERS_0)
    write_state(session, "orders", 0, led_by(LIVE, 4))
    assert cached.partition_leader(ORDERS_0) == Location(LIVE, 3)  # from the cache
    assert always.partition_leader(ORDERS_0) == Location(LIVE, 4)  # too old: read again
    assert cached.partition_leader(ORDERS_0, refresh=True) == Location(LIVE, 4)
    assert cached.partition_leader(ORDERS_0) == Location(LIVE, 4)


def test_an_unreadable_zookeeper_answers_from_the_cache_but_never_for_a_refresh(
    zk_connect: str, session: ZooKeeperSession, caplog: pytest.LogCaptureFixture
) -> None:
    write_topic(session, "orders", {0: led_by(LIVE, 3)})
    with ZooKeeperSession(zk_connect, session_timeout_ms=4000) as closing:
        locator = ZooKeeperLeaderLocator(closing, max_age_s=0, read_timeout_ms=500)
        assert locator.partition_leader(ORDERS_0) == Location(LIVE, 3)
    # The session is closed: every read fails.
    assert locator.partition_leader(ORDERS_0) == Location(LIVE, 3)
    assert locator.partition_leader(ORDERS_0, refresh=True) is None
    assert locator.partition_leader(TopicPartition("never-read", 0)) is None  # not GONE
    warnings = [r for r in caplog.records if "read from ZooKeeper failed" in r.getMessage()]
    assert len(warnings) == 1  # once per outage
