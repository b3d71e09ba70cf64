"""A topic's settings change while it is open (Kafka's IncrementalAlterConfigs): its
partitions take them at once, without a restart, and keep them across one; a setting
deleted falls back to the broker's default; bad names and values change nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    BatchTooLargeError,
    InvalidConfigError,
    NotEnoughReplicasError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}


def _settings(broker: Broker, name: str) -> dict[str, tuple[str, bool]]:
    return {key: (value, given) for key, value, given in broker.topic_settings(name)}


def test_settings_change_live_and_survive_a_restart(tmp_path: Path) -> None:
    big = batch([os.urandom(6000)])  # incompressible: bigger than 4096 as sent
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 1, {"max.message.bytes": "4096"})
        with pytest.raises(BatchTooLargeError):
            broker.produce("orders", 0, big)
        broker.alter_topic_config("orders", {"max.message.bytes": "65536", "segment.bytes": "8192"})
        assert broker.produce("orders", 0, big).base_offset == 0  # taken at once
        partition = broker.partition_manager.partition(TopicPartition("orders", 0))
        for _ in range(3):  # the smaller segments: the log rolls
            broker.produce("orders", 0, big)
        assert len(list(partition.log.directory.glob("*.log"))) > 1
        settings = _settings(broker, "orders")
        assert settings["max.message.bytes"] == ("65536", True)
        assert settings["segment.bytes"] == ("8192", True)
    with Broker.open(tmp_path, **CONFIG) as broker:
        assert _settings(broker, "orders")["max.message.bytes"] == ("65536", True)
        broker.alter_topic_config("orders", {}, ["segment.bytes", "max.message.bytes"])
        settings = _settings(broker, "orders")
        assert settings["segment.bytes"][1] is False  # the broker's default again
        assert settings["max.message.bytes"][1] is False
        assert broker.describe_topic("orders").config == {}


@pytest.mark.parametrize(
    ("set_values", "deleted", "message"),
    [
        ({"retention.ms": "-7"}, [], "retention_ms"),
        ({"bogus.setting": "1"}, [], "'bogus.setting' is not a topic setting"),
        ({}, ["replication.factor"], "change by reassignment"),
    ],
)
def test_bad_changes_change_nothing(
    tmp_path: Path, set_values: dict[str, str], deleted: list[str], message: str
) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 1, {"retention.ms": "60000"})
        with pytest.raises(InvalidConfigError, match=message):
            broker.alter_topic_config("orders", set_values, deleted)
        assert broker.describe_topic("orders").config == {"retention.ms": "60000"}
        with pytest.raises(InvalidConfigError, match="internal"):
            broker.alter_topic_config("__consumer_offsets", {"retention.ms": "1"})


def test_min_insync_replicas_is_a_topic_setting_taken_by_the_leader_live(tmp_path: Path) -> None:
    """A single node is a cluster of one: its default is 1; a topic asking for 2 has its
    writes refused (retriable, nothing written) until the setting goes back."""
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 1)
        assert _settings(broker, "orders")["min.insync.replicas"] == ("1", False)
        broker.alter_topic_config("orders", {"min.insync.replicas": "2"})
        with pytest.raises(NotEnoughReplicasError, match="below min_insync_replicas 2"):
            broker.produce("orders", 0, batch([b"refused"]))
        broker.alter_topic_config("orders", {}, ["min.insync.replicas"])
        assert broker.produce("orders", 0, batch([b"taken"])).base_offset == 0
