"""Regressions found in review of the cluster groundwork: a deferred copy readable past the
high watermark, retention past a lagging high watermark, a promotion forgotten at reopen, a
newer coordinator refused by an uncontacted partition, an old-layout log read as empty."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from broker_support import batch
from copier_support import PartitionFixture, plain_batch, transactional_batch
from partition_support import led_partition
from test_old_data_dir import write_old_segment

from twinlog.copier import PartitionWriter
from twinlog.engine.base.errors import (
    DataDirFormatError,
    DiskFullError,
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.log.read_only import LogReader
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.journal import CopyState, JournalLogs, LocalJournal

WORKER = Path(__file__).resolve().parents[2] / "support" / "copier_support.py"
TOPIC = "t"


def test_a_copy_whose_finish_is_deferred_stays_above_the_high_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy killed after 3 of its 5 batches is resumed at open; when the resume cannot run
    (a full disk), the 3 batches already in the log must not be served."""
    fixture = PartitionFixture(tmp_path)
    fixture.writer.append_plain(plain_batch(0))
    for i in range(5):
        fixture.j.append(fixture.name, 10, transactional_batch(10, 3 * i, record_count=3))
    fixture.close()
    env = dict(os.environ, TWINLOG_FAILPOINTS="copier.after_batch=crash@3")
    done = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path), "10"], env=env, capture_output=True, text=True
    )
    assert done.returncode == -9, done.stderr

    def full(self: PartitionWriter, record: object, resume_after: int = 0) -> None:
        raise DiskFullError("no space to resume the copy")

    monkeypatch.setattr(PartitionWriter, "_copy", full)
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    partition = led_partition(
        TopicPartition("orders", 0), tmp_path / "logs" / "orders-0", LogConfig(), journal
    )
    try:
        record = journal.transaction("orders-0", 10)
        assert record is not None and record.state is CopyState.APPLYING
        assert partition.log.log_end_offset > record.first_offset  # part of it is there
        assert partition.readable_end == record.first_offset  # what consumers may read
        served = partition.fetch(0, 1 << 20).records
        assert [b.header.base_offset for b in iter_batches(served)] == [0]
    finally:
        partition.close()
        journal.close()


def test_retention_never_moves_the_log_start_past_the_high_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker.open(
        tmp_path / "d",
        transaction_check_interval_ms=60_000,
        retention_check_interval_ms=3_600_000,
        replica_ack_timeout_ms=20,
    )
    try:
        broker.create_topic(TOPIC, 1, {"segment_bytes": "1024", "retention_bytes": "1024"})
        partition = broker.partition(TopicPartition(TOPIC, 0))
        broker.produce(TOPIC, 0, batch([b"x" * 100]))
        held = partition.log.log_end_offset
        monkeypatch.setattr(partition, "replicated_end", lambda: held)  # followers stuck
        for i in range(40):  # written, never acknowledged (acks=all)
            with pytest.raises(NotEnoughReplicasAfterAppendError):
                broker.produce(TOPIC, 0, batch([b"y%03d" % i + b"z" * 200]))
        partition.apply_retention()
        assert partition.log.log_start_offset <= partition.high_watermark.value == held
        with pytest.raises(NotEnoughReplicasAfterAppendError):  # no failed invariant either
            broker.produce(TOPIC, 0, batch([b"after"]))
    finally:
        broker.close()


def test_a_promotion_is_remembered_across_a_reopen_before_any_batch(tmp_path: Path) -> None:
    with DataLog.open(tmp_path) as log:
        log.append_as_leader(batch([b"a"]))
        log.become_leader(5)  # promoted; nothing appended under epoch 5 yet
    with DataLog.open(tmp_path) as log:
        assert log.leader_epoch == 5
        with pytest.raises(ValueError):
            log.become_leader(3)


def test_a_deposed_callers_epoch_is_refused_after_a_restart(tmp_path: Path) -> None:
    with Broker.open(tmp_path / "d", transaction_check_interval_ms=60_000) as broker:
        broker.create_topic(TOPIC, 1)
        broker.produce(TOPIC, 0, batch([b"a"]))
        broker.partition(TopicPartition(TOPIC, 0)).epochs.become_leader(3)
    with Broker.open(tmp_path / "d", transaction_check_interval_ms=60_000) as broker:
        with pytest.raises(FencedLeaderEpochError):
            broker.partition(TopicPartition(TOPIC, 0)).epochs.check_leader_epoch(0)


def test_a_newer_coordinator_takes_the_first_batch_of_a_partition_it_never_called(
    tmp_path: Path,
) -> None:
    """After a failover the coordinator's epoch is above what an uncontacted partition has
    seen (0): that is normal, not a fenced coordinator."""
    with Broker.open(tmp_path / "d", transaction_check_interval_ms=60_000) as broker:
        broker.create_topic(TOPIC, 1)
        identity = broker.init_producer("x")
        txn = broker.begin_transaction(identity.producer_id, identity.producer_generation)
        broker.coordinator_manager.for_id(txn).coordinator_epoch = 1  # the journal's new leader
        broker.produce(TOPIC, 0, batch([b"v"], identity, 0, txn), transaction_id=txn)
        broker.commit_transaction(
            txn, identity.producer_id, identity.producer_generation, wait_for_applied=True
        )
        served = broker.fetch(TOPIC, 0, 0).records
        assert [r.value for b in iter_batches(served) for r in b.records()] == [b"v"]


def test_a_reader_without_a_broker_refuses_an_old_layout_log(tmp_path: Path) -> None:
    write_old_segment(tmp_path, count=3)
    with pytest.raises(DataDirFormatError, match="older twinlog"):
        LogReader(tmp_path)
