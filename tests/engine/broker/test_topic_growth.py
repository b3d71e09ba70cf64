"""A topic grows (Kafka's CreatePartitions): the new partitions are written and read at
once, the count survives a restart, and a count not above the topic's is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.topic_registry import PARTITIONS_MAX
from twinlog.engine.records.batch_reader import iter_batches

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}


def _values(broker: Broker, topic: str, partition: int) -> list[bytes | None]:
    fetched = broker.fetch(topic, partition, 0, max_bytes=1 << 20)
    return [record.value for b in iter_batches(fetched.records) for record in b.records()]


def test_a_grown_topic_takes_writes_in_its_new_partitions_and_keeps_its_count(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 2)
        broker.produce("orders", 0, batch([b"before"]))
        before_id = broker.describe_topic("orders").topic_id
        grown = broker.create_partitions("orders", 5)
        assert [p.partition for p in grown.partitions] == [0, 1, 2, 3, 4]
        assert grown.topic_id == before_id  # the same topic, grown
        assert broker.produce("orders", 4, batch([b"new"])).base_offset == 0
        assert _values(broker, "orders", 4) == [b"new"]
    with Broker.open(tmp_path, **CONFIG) as broker:
        assert len(broker.describe_topic("orders").partitions) == 5
        assert _values(broker, "orders", 4) == [b"new"]
        assert _values(broker, "orders", 0) == [b"before"]


@pytest.mark.parametrize("count", [0, 2, 3])
def test_a_topic_never_shrinks_or_stays(tmp_path: Path, count: int) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 3)
        with pytest.raises(InvalidPartitionsError, match="has 3 partitions; it can only grow"):
            broker.create_partitions("orders", count)
        assert len(broker.describe_topic("orders").partitions) == 3


def test_growth_beyond_the_limit_unknown_and_internal_topics_are_refused(tmp_path: Path) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 1)
        with pytest.raises(InvalidPartitionsError, match="above the limit"):
            broker.create_partitions("orders", PARTITIONS_MAX + 1)
        with pytest.raises(UnknownTopicOrPartitionError):
            broker.create_partitions("missing", 2)
        with pytest.raises(InvalidConfigError, match="__consumer_offsets is internal"):
            broker.create_partitions("__consumer_offsets", 8)
        assert len(broker.describe_topic("orders").partitions) == 1


def test_validate_only_checks_everything_and_changes_nothing(tmp_path: Path) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        broker.create_topic("orders", 1)
        checked = broker.create_partitions("orders", 4, validate_only=True)
        assert len(checked.partitions) == 1
        assert len(broker.describe_topic("orders").partitions) == 1
        with pytest.raises(InvalidPartitionsError):
            broker.create_partitions("orders", 1, validate_only=True)
        with pytest.raises(InvalidConfigError, match="internal"):
            broker.create_partitions("__consumer_offsets", 8, validate_only=True)
