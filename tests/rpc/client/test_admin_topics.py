"""``Admin.create_topic``'s ``replication_factor``, as Kafka's ``NewTopic`` takes it: the same
as the ``replication.factor`` setting, on an embedded single node (which keeps one copy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client import Admin

SINGLE_NODE = "a single node keeps one copy of each partition"


@pytest.fixture()
def admin(tmp_path: Path) -> Iterator[Admin]:
    with Broker.open(tmp_path / "data") as broker, Admin(broker) as admin:
        yield admin


def test_a_replication_factor_the_node_can_keep_creates_the_topic(admin: Admin) -> None:
    created = admin.create_topic("kept", 2, replication_factor=1)
    assert created.name == "kept" and len(created.partitions) == 2
    assert "kept" in admin.list_topics()


def test_the_argument_reaches_the_broker_as_the_setting_does(admin: Admin) -> None:
    """Three copies on one node is refused the same way, whichever spelling asked for it
    (an argument dropped on the way would create the topic with the default, one)."""
    with pytest.raises(InvalidConfigError, match=SINGLE_NODE) as by_setting:
        admin.create_topic("three", 1, {"replication.factor": "3"})
    with pytest.raises(InvalidConfigError, match=SINGLE_NODE) as by_argument:
        admin.create_topic("three", 1, replication_factor=3)
    assert str(by_argument.value) == str(by_setting.value)
    assert "three" not in admin.list_topics()


def test_the_argument_and_the_setting_must_agree(admin: Admin) -> None:
    admin.create_topic("agreed", 1, {"replication.factor": "1"}, replication_factor=1)
    with pytest.raises(InvalidConfigError, match="disagree; give one of them"):
        admin.create_topic("torn", 1, {"replication.factor": "2"}, replication_factor=1)
    with pytest.raises(InvalidConfigError, match="must be an integer"):
        admin.create_topic("odd", 1, replication_factor="1")  # type: ignore[arg-type]
    assert "torn" not in admin.list_topics() and "odd" not in admin.list_topics()
