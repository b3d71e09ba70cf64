"""``Broker.delete_records`` (Kafka's DeleteRecords, KIP-107) on one node: the log start moves
and stays over a restart, -1 means the high watermark, an offset above it is refused, and a
transaction's copy not yet recorded as APPLIED stops the start (as it stops retention)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import (
    InvalidConfigError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal import CopyState

CONFIG = {
    "journal_partitions": 1,
    "offsets_partitions": 1,
    "retention_check_interval_ms": 3_600_000,  # no retention pass of its own meanwhile
}
TOPIC_CONFIG = {"segment.bytes": "300"}
WAIT_S = 10.0


def _values(records: bytes) -> list[bytes | None]:
    return [record.value for b in iter_batches(records) for record in b.records()]


def _produce(broker: Broker, count: int, prefix: str = "v") -> None:
    for number in range(count):
        broker.produce("t", 0, batch([f"{prefix}{number}".encode() * 8]))


def test_records_below_the_offset_are_gone_and_stay_gone(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t", partitions=1, config=TOPIC_CONFIG)
        _produce(broker, 20)
        partition = broker.partition(TopicPartition("t", 0))
        segments_before = len(list(partition.directory.glob("*.log")))
        assert broker.delete_records("t", 0, 7) == 7
        assert broker.list_offset("t", 0, "earliest") == 7
        assert len(list(partition.directory.glob("*.log"))) < segments_before
        with pytest.raises(OffsetOutOfRangeError) as refused:
            broker.fetch("t", 0, 6)
        assert refused.value.log_start_offset == 7
        assert _values(broker.fetch("t", 0, 7).records)[0] == b"v7" * 8
        assert broker.delete_records("t", 0, 3) == 7  # below the start: nothing changes
    with Broker.open(tmp_path / "data", **CONFIG) as reopened:
        assert reopened.list_offset("t", 0, "earliest") == 7
        with pytest.raises(OffsetOutOfRangeError):
            reopened.fetch("t", 0, 0)
        _produce(reopened, 1, prefix="after")
        assert reopened.delete_records("t", 0, -1) == 21  # -1: the high watermark
        assert reopened.fetch("t", 0, 21).records == b""


def test_an_offset_above_the_high_watermark_is_refused(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t", partitions=1)
        _produce(broker, 3)
        with pytest.raises(OffsetOutOfRangeError, match="high watermark 3"):
            broker.delete_records("t", 0, 4)
        with pytest.raises(OffsetOutOfRangeError):
            broker.delete_records("t", 0, -2)
        with pytest.raises(UnknownTopicOrPartitionError):
            broker.delete_records("t", 1, 0)
        with pytest.raises(InvalidConfigError, match="is internal"):
            broker.delete_records("__consumer_offsets", 0, -1)
        assert broker.list_offset("t", 0, "earliest") == 0


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_copy_not_yet_recorded_applied_stops_the_start(tmp_path: Path) -> None:
    plain_records, copied_batches = 4, 5
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t", partitions=1, config=TOPIC_CONFIG)
        _produce(broker, plain_records)
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        for number in range(copied_batches):
            broker.produce(
                "t",
                0,
                batch([f"txn-{number}".encode() * 4], producer, number, transaction_id, "none"),
                transaction_id=transaction_id,
            )
        partition = broker.partition(TopicPartition("t", 0))
        end = plain_records + copied_batches
        # Recording APPLYING succeeds (hit 1), recording APPLIED fails until disarmed.
        failpoints.arm("journal.before_sync", "raise", on_hit=2, times=1_000_000)
        try:
            broker.commit_transaction(
                transaction_id, producer.producer_id, producer.producer_generation
            )

            def applying() -> bool:
                record = partition.journal.transaction("t-0", transaction_id)
                return (
                    partition.high_watermark.value == end
                    and record is not None
                    and record.state is CopyState.APPLYING
                )

            _wait_for(applying, "the copy, APPLIED not recorded")
            # Stopped at the copy's first batch, and said so by the start returned.
            assert broker.delete_records("t", 0, -1) == plain_records
        finally:
            failpoints.disarm_all()  # the retry records APPLIED

        def applied() -> bool:
            record = partition.journal.transaction("t-0", transaction_id)
            return record is not None and record.state is CopyState.APPLIED

        _wait_for(applied, "APPLIED")
        assert broker.delete_records("t", 0, -1) == end
