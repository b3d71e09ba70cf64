"""Retention never deletes what an APPLYING copy holds.

Recording APPLIED can fail for a moment (a full disk for ~100 ms); the copy then
waits in the data log, APPLYING in the journal, until the retry records it.
Size or age retention running meanwhile must leave its segments alone (as
compaction does), or the retry cannot recognise the copy: the commit never
completes and every produce to the partition fails.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from broker_support import batch

from twinlog.engine.base import failpoints
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.scheduler import apply_retention
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal import CopyState

CONFIG = {
    "journal_partitions": 1,
    "offsets_partitions": 1,
    "retention_check_interval_ms": 3_600_000,  # the test runs retention itself
}
TOPIC_CONFIG = {"segment.bytes": "300", "retention.bytes": "300", "retention.ms": "-1"}
BATCHES = 10
WAIT_S = 10.0


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("action", ["raise", "enospc"])
def test_retention_keeps_a_copy_not_yet_recorded_applied(tmp_path: Path, action: str) -> None:
    with Broker.open(tmp_path / "data", **CONFIG) as broker:
        broker.create_topic("t", partitions=1, config=TOPIC_CONFIG)
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        for number in range(BATCHES):
            values = [f"txn-{number}-{n}".encode() * 3 for n in range(2)]
            broker.produce(
                "t",
                0,
                batch(values, producer, 2 * number, transaction_id, "none"),
                transaction_id=transaction_id,
            )
        partition = broker.partition(TopicPartition("t", 0))
        # Recording APPLYING succeeds (hit 1), recording APPLIED fails until disarmed.
        failpoints.arm("journal.before_sync", action, on_hit=2, times=1_000_000)
        broker.commit_transaction(
            transaction_id, producer.producer_id, producer.producer_generation
        )

        def copied_not_applied() -> bool:
            record = broker.partition(TopicPartition("t", 0)).journal.transaction(
                "t-0", transaction_id
            )
            return (
                partition.log.log_end_offset == 2 * BATCHES
                and record is not None
                and record.state is CopyState.APPLYING
            )

        _wait_for(copied_not_applied, "the copy, APPLIED not recorded")
        apply_retention([partition])  # what the scheduler runs
        assert partition.log.log_start_offset == 0, "retention deleted an APPLYING copy"
        failpoints.disarm_all()  # space returns: the retry records APPLIED

        def applied() -> bool:
            record = partition.journal.transaction("t-0", transaction_id)
            return record is not None and record.state is CopyState.APPLIED

        _wait_for(applied, "APPLIED")
        plain = broker.init_producer()
        assert broker.produce("t", 0, batch([b"after"], plain, 0)).base_offset == 2 * BATCHES
        apply_retention([partition])  # now nothing holds it back
        assert partition.log.log_start_offset > 0
        fetched = broker.fetch("t", 0, 2 * BATCHES, max_bytes=1 << 20)
        values = [r.value for b in iter_batches(fetched.records) for r in b.records()]
        assert values == [b"after"]


def test_a_directory_whose_applying_copy_lost_its_start_opens_and_completes(
    tmp_path: Path,
) -> None:
    # The state older versions left: retention deleted the first segments of a copy
    # APPLIED was not recorded for, then the broker stopped. It must open, and the
    # commit complete.
    directory = tmp_path / "data"
    broker = Broker.open(directory, **CONFIG)
    try:
        broker.create_topic("t", partitions=1, config=TOPIC_CONFIG)
        producer = broker.init_producer("app")
        transaction_id = broker.begin_transaction(
            producer.producer_id, producer.producer_generation
        )
        for number in range(BATCHES):
            values = [f"txn-{number}-{n}".encode() * 3 for n in range(2)]
            broker.produce(
                "t",
                0,
                batch(values, producer, 2 * number, transaction_id, "none"),
                transaction_id=transaction_id,
            )
        partition = broker.partition(TopicPartition("t", 0))
        failpoints.arm("journal.before_sync", "enospc", on_hit=2, times=1_000_000)
        broker.commit_transaction(
            transaction_id, producer.producer_id, producer.producer_generation
        )
        _wait_for(lambda: partition.log.log_end_offset == 2 * BATCHES, "the copy")
        assert partition.log.apply_retention() > 0  # unbounded, as before
    finally:
        broker.close()
        failpoints.disarm_all()
    with Broker.open(directory, **CONFIG) as broker:
        partition = broker.partition(TopicPartition("t", 0))
        plain = broker.init_producer()
        assert broker.produce("t", 0, batch([b"after"], plain, 0)).base_offset == 2 * BATCHES
        # The copy was answered once durable: its MARK_APPLIED, left for a next copy group,
        # failed (the full disk), so the recovery before this first write recorded it.
        record = partition.journal.transaction("t-0", transaction_id)
        assert record is not None and record.state is CopyState.APPLIED
        assert record.applied_range == (0, 2 * BATCHES)
