"""``Broker.auto_create_topic``: a producer's first use creates a missing topic with the
broker's ``num_partitions`` and default replication factor (Kafka's auto.create.topics.enable),
inside the door's hook; a topic another caller created meanwhile is no error."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.base.errors import (
    AuthorizationError,
    InvalidConfigError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.config import BrokerConfig

LOGGER = "twinlog.engine.broker.topic_manager"


def test_a_missing_topic_is_created_once_with_the_brokers_defaults(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entered: list[str] = []

    @contextlib.contextmanager
    def creating() -> Iterator[None]:
        entered.append("create")
        yield

    with Broker.open(tmp_path / "data", num_partitions=2) as broker:
        with caplog.at_level(logging.INFO, logger=LOGGER):
            created = broker.auto_create_topic("first-use", creating)
            again = broker.auto_create_topic("first-use", creating)
        assert len(created.partitions) == len(again.partitions) == 2
        assert again.topic_id == created.topic_id
        assert entered == ["create"]  # the door's hook wraps the creation only
    lines = [r.getMessage() for r in caplog.records if "auto-created" in r.getMessage()]
    assert lines == [
        "topic first-use auto-created with 2 partitions, replication factor 1 "
        "(auto.create.topics.enable)"
    ]


def test_a_topic_created_meanwhile_is_taken_as_it_is(tmp_path: Path) -> None:
    """Two creators racing (two producers, or two brokers of a cluster): the loser's
    creation fails with TopicExistsError inside its hook, and its caller gets the topic."""
    with Broker.open(tmp_path / "data") as broker:
        failed: list[BaseException] = []

        @contextlib.contextmanager
        def raced() -> Iterator[None]:
            broker.create_topic("raced", 4)  # the other creator wins
            try:
                yield
            except BaseException as error:
                failed.append(error)
                raise

        description = broker.auto_create_topic("raced", raced)
        assert len(description.partitions) == 4
        assert [type(error).__name__ for error in failed] == ["TopicExistsError"]


def test_refused_by_the_door_nothing_is_created(tmp_path: Path) -> None:
    @contextlib.contextmanager
    def refused() -> Iterator[None]:
        raise AuthorizationError("no CREATE")
        yield

    with Broker.open(tmp_path / "data") as broker:
        with pytest.raises(AuthorizationError, match="no CREATE"):
            broker.auto_create_topic("not-mine", refused)
        assert broker.list_topics() == []


def test_what_is_never_created(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "off", auto_create_topics_enable=False) as broker:
        with pytest.raises(UnknownTopicOrPartitionError, match=r"enable=false.*topics create"):
            broker.auto_create_topic("wanted")
        assert broker.list_topics() == []
    with Broker.open(tmp_path / "on") as broker:
        with pytest.raises(UnknownTopicOrPartitionError, match="never created on first use"):
            broker.auto_create_topic("__mine")
        with pytest.raises(InvalidConfigError, match="not valid"):
            broker.auto_create_topic("no/slashes")
        assert broker.list_topics() == []


def test_the_settings_take_kafkas_names() -> None:
    config = BrokerConfig.from_mapping(
        {"auto.create.topics.enable": "false", "num.partitions": "6"}
    )
    assert (config.auto_create_topics_enable, config.num_partitions) == (False, 6)
    assert BrokerConfig().auto_create_topics_enable  # on by default, as Kafka's
    with pytest.raises(InvalidConfigError, match="num_partitions is 0, expected 1"):
        BrokerConfig.from_mapping({"num.partitions": "0"})
