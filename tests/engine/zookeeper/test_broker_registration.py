"""Broker membership on a real ZooKeeper: an ephemeral registration whose czxid is the
broker epoch, a new epoch for every registration, one live holder per id."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from zookeeper_support import SESSION_TIMEOUT_MS

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.broker_registration import (
    PREVIOUS_RUN_WAIT_TIMEOUTS,
    BrokerInfo,
    live_brokers,
    register_broker,
)
from twinlog.engine.zookeeper.cluster_view import read_cluster_metadata
from twinlog.engine.zookeeper.session import ZooKeeperSession


def test_a_registration_lives_with_its_session_and_a_new_one_has_a_larger_epoch(
    zk_connect: str, session: ZooKeeperSession
) -> None:
    with ZooKeeperSession(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS) as broker:
        first = register_broker(broker, 1, "10.0.0.1", 9092, "d1")
        assert first.info == BrokerInfo(1, "10.0.0.1", 9092, "d1", first.broker_epoch)
        assert first.broker_epoch == session.client.get(znodes.broker_path(1))[1].czxid
        assert live_brokers(session) == {1: first.info}
        # Asked again by the same session (an answer lost on the way): the same registration.
        assert register_broker(broker, 1, "10.0.0.1", 9092, "d1") == first
    assert live_brokers(session) == {}  # the session closed: ZooKeeper deleted it
    with ZooKeeperSession(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS) as restarted:
        second = register_broker(restarted, 1, "10.0.0.1", 9092, "d1")
        assert second.broker_epoch > first.broker_epoch
        assert live_brokers(session)[1].broker_epoch == second.broker_epoch


def test_a_live_id_is_refused_naming_its_holder(zk_connect: str, session: ZooKeeperSession) -> None:
    register_broker(session, 5, "10.0.0.5", 9095, "d5")
    with ZooKeeperSession(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS) as other:
        with pytest.raises(InvalidConfigError, match=r"broker_id 5 .*10\.0\.0\.5:9095") as error:
            register_broker(other, 5, "10.0.0.6", 9096, "d6")
        assert "another broker_id" in str(error.value)
        assert live_brokers(other)[5].address == "10.0.0.5:9095"
    with pytest.raises(InvalidConfigError, match="broker_id"):
        register_broker(session, -1, "h", 1, "d")


def test_an_inter_broker_address_is_registered_beside_the_clients_one(
    session: ZooKeeperSession,
) -> None:
    plain = register_broker(session, 7, "10.0.0.7", 9097, "d7")
    assert plain.info.inter_broker_address == "10.0.0.7:9097"  # brokers use the same one
    split = register_broker(session, 8, "10.0.0.8", 9098, "d8", ("10.1.0.8", 19098))
    assert split.info.address == "10.0.0.8:9098"  # what clients get in Metadata
    assert split.info.inter_broker_address == "10.1.0.8:19098"  # what other brokers dial
    assert live_brokers(session)[8] == split.info  # read back as written


def test_a_kafka_listener_address_is_registered_and_read_back(session: ZooKeeperSession) -> None:
    without = register_broker(session, 9, "10.0.0.9", 9099, "d9")
    assert (without.info.kafka_host, without.info.kafka_port) == ("", 0)
    with_kafka = register_broker(session, 10, "10.0.0.10", 7070, "d10", None, ("10.0.0.10", 9092))
    assert (with_kafka.info.kafka_host, with_kafka.info.kafka_port) == ("10.0.0.10", 9092)
    assert live_brokers(session)[10] == with_kafka.info
    brokers = {item.broker_id: item for item in read_cluster_metadata(session).brokers}
    assert brokers[10].kafka_address == ("10.0.0.10", 9092)  # what Kafka Metadata names
    assert brokers[10].address == "10.0.0.10:7070"
    assert brokers[9].kafka_address is None


SHORT_SESSION_TIMEOUT_MS = 2000  # the server's tick (500 ms) allows 1..10 s
ROOT = Path(__file__).resolve().parents[3]


def test_a_killed_brokers_restart_waits_out_its_old_session_and_registers(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker SIGKILLed and started again at once (a supervisor's restart) meets its own
    registration, naming its own data directory: it waits for ZooKeeper to expire the dead
    session, with a log line, instead of exiting."""
    script = textwrap.dedent(
        f"""
        import time
        from twinlog.engine.zookeeper.broker_registration import register_broker
        from twinlog.engine.zookeeper.session import ZooKeeperSession
        session = ZooKeeperSession({zk_connect!r}, session_timeout_ms={SHORT_SESSION_TIMEOUT_MS})
        register_broker(session, 3, "127.0.0.1", 9093, "dir3")
        print("registered", flush=True)
        time.sleep(60)
        """
    )
    previous = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=ROOT.parent, text=True
    )
    try:
        assert previous.stdout is not None
        assert previous.stdout.readline().strip() == "registered"
        os.kill(previous.pid, signal.SIGKILL)  # its session is never closed
        previous.wait(10)
    finally:
        if previous.poll() is None:
            previous.kill()
            previous.wait(10)
        if previous.stdout is not None:
            previous.stdout.close()
    with ZooKeeperSession(zk_connect, session_timeout_ms=SHORT_SESSION_TIMEOUT_MS) as restarted:
        old_epoch = live_brokers(restarted)[3].broker_epoch
        started_s = time.monotonic()
        with caplog.at_level(logging.INFO, "twinlog.engine.zookeeper.broker_registration"):
            registration = register_broker(restarted, 3, "127.0.0.1", 9093, "dir3")
        waited_s = time.monotonic() - started_s
        assert registration.broker_epoch > old_epoch  # a new incarnation (KIP-903)
        assert live_brokers(restarted)[3] == registration.info
    assert "still registered by this data directory's previous run" in caplog.text
    assert "previous run's registration expired after" in caplog.text
    # It waited for the expiry (about one session timeout), not the whole bound.
    assert 0.3 < waited_s < PREVIOUS_RUN_WAIT_TIMEOUTS * SHORT_SESSION_TIMEOUT_MS / 1000


def test_a_live_holder_of_the_same_data_directory_is_refused_after_the_bound(
    zk_connect: str, session: ZooKeeperSession
) -> None:
    """A registration naming this data directory that outlives the wait is a live copy of
    the directory elsewhere: refused, saying so."""
    register_broker(session, 4, "10.0.0.4", 9094, "dir4")
    with ZooKeeperSession(zk_connect, session_timeout_ms=SHORT_SESSION_TIMEOUT_MS) as other:
        started_s = time.monotonic()
        with pytest.raises(InvalidConfigError, match="a live copy of this directory") as error:
            register_broker(other, 4, "10.0.0.5", 9095, "dir4")
        waited_s = time.monotonic() - started_s
    assert "10.0.0.4:9094" in str(error.value)
    assert waited_s >= PREVIOUS_RUN_WAIT_TIMEOUTS * SHORT_SESSION_TIMEOUT_MS / 1000 - 0.5
    assert live_brokers(session)[4].address == "10.0.0.4:9094"  # the holder keeps it
