"""Broker membership on a real ZooKeeper: an ephemeral registration whose czxid is the
broker epoch, a new epoch for every registration, one live holder per id."""

from __future__ import annotations

import pytest
from zookeeper_support import SESSION_TIMEOUT_MS

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.broker_registration import (
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
