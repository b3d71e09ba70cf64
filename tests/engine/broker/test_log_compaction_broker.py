"""Compaction in the broker: __consumer_offsets is compacted and folds to the same answers,
keyless records are refused for compacted topics, and a copy not yet APPLIED is left alone."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from broker_support import batch
from log_support import all_batches
from partition_support import led_partition
from test_broker import Txn

from twinlog.engine.base import failpoints
from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import CorruptBatchError, CorruptJournalError
from twinlog.engine.base.failpoints import FailpointError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.group_offsets import OFFSETS_TOPIC, encode_key
from twinlog.engine.broker.partition import Partition
from twinlog.engine.log import LogConfig, compact
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import validate_batch
from twinlog.journal import CopyState, JournalLogs, LocalJournal

DAY_MS = 24 * 3600 * 1000
GROUPS = ["billing", "search", "audit-readers"]
SMALL = {"offsets_segment_bytes": 2048, "offsets_partitions": 2}


def offsets_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / "logs").glob(f"{OFFSETS_TOPIC}-*/*.log"))


def commit_many(broker: Broker, rounds: int) -> dict[str, dict[TopicPartition, int]]:
    """Plain and transactional commits, many per key; returns the last offset of each."""
    expected: dict[str, dict[TopicPartition, int]] = {group: {} for group in GROUPS}
    producer = Txn(broker, "processor")
    for number in range(rounds):
        for group in GROUPS:
            offsets = {TopicPartition("orders", p): number * 10 + p for p in range(3)}
            if number % 5 == 4:  # every fifth round: offsets inside a transaction
                producer.begin()
                broker.send_offsets_to_transaction(
                    producer.transaction_id,
                    producer.identity.producer_id,
                    producer.identity.producer_generation,
                    group,
                    offsets,
                )
                producer.commit()
            else:
                broker.commit_offsets(group, offsets)
            expected[group].update(offsets)
    return expected


def fetch_all(broker: Broker, partitions: list[TopicPartition]) -> dict[str, dict]:
    return {group: broker.fetch_offsets(group, partitions) for group in GROUPS}


def test_consumer_offsets_is_compacted_and_folds_to_the_same_answers(tmp_path: Path) -> None:
    partitions = [TopicPartition("orders", p) for p in range(4)]  # one never committed
    with Broker.open(tmp_path, **SMALL) as broker:
        broker.create_topic("orders", partitions=3)
        log_config = broker.partition(TopicPartition(OFFSETS_TOPIC, 0)).log.config
        assert log_config.compacts and not log_config.deletes
        assert log_config.segment_bytes == 2048
        expected = commit_many(broker, 120)
        before = fetch_all(broker, partitions)
        assert {g: {tp: o for tp, o in before[g].items() if o >= 0} for g in GROUPS} == expected
        bytes_before = offsets_bytes(tmp_path)
        records_before = sum(
            len(records)
            for p in range(2)
            for _, records in all_batches(broker.partition(TopicPartition(OFFSETS_TOPIC, p)).log)
        )
        broker.scheduler.run_round("compaction")  # what the background task runs
        assert offsets_bytes(tmp_path) < bytes_before / 4
        assert fetch_all(broker, partitions) == before
        commit_many(broker, 1)  # and commits go on after it
        before = fetch_all(broker, partitions)
    with Broker.open(tmp_path, **SMALL) as broker:  # the fold at start-up
        assert fetch_all(broker, partitions) == before
        records_after = sum(
            len(records)
            for p in range(2)
            for _, records in all_batches(broker.partition(TopicPartition(OFFSETS_TOPIC, p)).log)
        )
        assert records_after < records_before / 10  # the fold reads live keys, not history


def test_the_background_task_compacts(tmp_path: Path) -> None:
    with Broker.open(tmp_path, compaction_check_interval_ms=20, **SMALL) as broker:
        broker.create_topic("orders", partitions=3)
        commit_many(broker, 60)
        logs = [broker.partition(TopicPartition(OFFSETS_TOPIC, p)).log for p in range(2)]

        def sealed_records_and_keys() -> tuple[int, int]:
            records = [
                record
                for log in logs
                for header, batch_records in all_batches(log)
                if header.base_offset < log._segment_list.published.base_offsets[-1]  # sealed
                for record in batch_records
            ]
            return len(records), len({record.key for record in records})

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            records, keys = sealed_records_and_keys()
            if records == keys:  # one record per key left in every sealed segment
                break
            time.sleep(0.02)
        assert records == keys and keys > 0, (records, keys)


def test_a_deleted_offset_stays_deleted_after_its_tombstone_expires(tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    with Broker.open(tmp_path, **SMALL) as broker:
        broker.create_topic("orders")
        broker.commit_offsets("gone", {tp: 7})
        target = broker.partition(broker.group_offsets.partition_for("gone"))
        builder = RecordBatchBuilder("none")
        builder.append(None, key=encode_key("gone", tp))  # a deletion of the group's offset
        deletion = builder.build()
        target.append_plain(deletion, validate_batch(deletion))
        commit_many(broker, 80)  # seal segments after it
        later_ms = time.time_ns() // 1_000_000 + 2 * DAY_MS
        assert compact(target.log, later_ms).tombstones_dropped == 1
    with Broker.open(tmp_path, **SMALL) as broker:
        assert broker.fetch_offsets("gone", [tp]) == {tp: -1}


def test_an_older_data_directory_gets_a_compacted_offsets_topic(tmp_path: Path) -> None:
    with Broker.open(tmp_path):
        pass
    meta = json.loads(read_checked(tmp_path / "meta"))
    meta["topics"][OFFSETS_TOPIC]["config"] = {"retention.ms": "-1"}  # as before compaction
    replace_file(tmp_path / "meta", with_checksum(json.dumps(meta).encode()))
    with Broker.open(tmp_path) as broker:
        config = broker.partition(TopicPartition(OFFSETS_TOPIC, 0)).log.config
        assert config.compacts and config.retention_ms == -1


def test_keyless_records_are_refused_for_a_compacted_topic(tmp_path: Path) -> None:
    with Broker.open(tmp_path) as broker:
        broker.create_topic("state", config={"cleanup.policy": "compact"})
        broker.create_topic("events")
        with pytest.raises(CorruptBatchError, match="null key, but topic state is compacted"):
            broker.produce("state", 0, batch([b"no key"]))
        producer = Txn(broker, "writer")
        producer.begin()
        with pytest.raises(CorruptBatchError, match="null key"):  # refused before the journal
            producer.send("state", 0, [b"no key either"])
        producer.abort()
        broker.produce("state", 0, batch([b"abc-keyed"], keyed=True))
        broker.produce("events", 0, batch([b"no key is fine here"]))
        assert broker.fetch("state", 0, 0).records  # the keyed one is there
        with pytest.raises(Exception, match="cleanup_policy"):
            broker.create_topic("bad", config={"cleanup.policy": "shred"})


# --- the copier's window: a copy in the log, APPLYING still recorded ------------------------


def _partition_with_an_unrecorded_copy(tmp_path: Path) -> tuple[JournalLogs, Partition, bytes]:
    """A compacted partition whose last transaction was copied (over several segments, its
    later batches replacing its earlier ones' keys) but not yet recorded as APPLIED."""
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    config = LogConfig(
        segment_bytes=300,
        index_interval_bytes=100,
        cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.0,
    )
    partition = led_partition(TopicPartition("state", 0), tmp_path / "log", config, journal)
    transaction_id = 7 << 8
    for sequence in range(12):
        writes: list[tuple[bytes | None, bytes | None]] = [
            (b"k%d" % (sequence % 3), b"%d" % sequence)
        ]
        journal.append(
            partition.name,
            transaction_id,
            _transactional(writes, transaction_id, sequence),
            producer_id=99,
            producer_generation=0,
            base_sequence=sequence,
        )
    failpoints.arm("copier.after_log_fsync", "raise")
    try:
        with pytest.raises(FailpointError):
            partition.apply_commit(transaction_id)
    finally:
        failpoints.disarm_all()
    assert journal.transaction(partition.name, transaction_id).state is CopyState.APPLYING
    return journal, partition, partition.log.read(0, 1 << 20)


def _transactional(
    writes: list[tuple[bytes | None, bytes | None]], transaction_id: int, sequence: int
) -> bytes:
    builder = RecordBatchBuilder(
        "none",
        producer_id=99,
        producer_generation=0,
        base_sequence=sequence,
        transactional=True,
    )
    for key, value in writes:
        builder.append(value, key=key, timestamp_ms=1_700_000_000_000)
    return builder.build()


def test_a_copy_not_yet_applied_is_not_rewritten(tmp_path: Path) -> None:
    journal, partition, copied = _partition_with_an_unrecorded_copy(tmp_path)
    assert len(list((tmp_path / "log").glob("*.log"))) > 2  # the copy rolled segments
    report = partition.compact_log()
    assert report.skipped == "no sealed segment may be compacted yet"
    assert partition.log.read(0, 1 << 20) == copied
    partition.close()
    reopened = led_partition(
        TopicPartition("state", 0), tmp_path / "log", partition.log.config, journal
    )
    reopened.writer.recover()  # what its first write or APPLY runs first
    assert reopened.log.read(0, 1 << 20) == copied  # recovery recognised its whole copy
    assert journal.transaction(reopened.name, 7 << 8).state is CopyState.APPLIED
    assert reopened.compact_log().records_dropped > 0  # and now it may be compacted
    reopened.close()
    journal.close()


def test_without_that_bound_the_copiers_recovery_would_refuse_the_log(tmp_path: Path) -> None:
    journal, partition, _ = _partition_with_an_unrecorded_copy(tmp_path)
    assert compact(partition.log).records_dropped > 0  # no protected offset: it rewrites
    partition.close()
    reopened = led_partition(
        TopicPartition("state", 0), tmp_path / "log", partition.log.config, journal
    )
    with pytest.raises(CorruptJournalError):
        reopened.writer.recover()  # what its first write or APPLY runs first
    reopened.close()
    journal.close()


@pytest.fixture(autouse=True)
def _disarm() -> None:
    failpoints.disarm_all()


def test_a_consumer_reads_past_batches_that_compaction_emptied(tmp_path: Path) -> None:
    from twinlog.rpc.client import Consumer

    with Broker.open(tmp_path) as broker:
        config = {"cleanup.policy": "compact", "segment.bytes": "1000"}
        broker.create_topic("state", config=config)
        broker.produce("state", 0, batch([b"a-first"], keyed=True))
        deletion = RecordBatchBuilder("none")
        deletion.append(None, key=b"zzz", timestamp_ms=1)  # long expired
        broker.produce("state", 0, deletion.build())
        for name in (b"bbb", b"ccc"):  # each rolls a segment: the first one ends there
            value = name + b"".ljust(900, b"v")
            broker.produce("state", 0, batch([value], keyed=True, codec="none"))
        report = broker.partition(TopicPartition("state", 0)).compact_log()
        assert report.tombstones_dropped == 1  # the first segment now ends in a filler
        consumer = Consumer(broker)
        consumer.assign([("state", 0)])
        consumer.seek_to_beginning()
        received = []
        deadline = time.monotonic() + 2
        while len(received) < 3 and time.monotonic() < deadline:
            received += consumer.poll(timeout_ms=100)
        consumer.close()
        assert [record.key for record in received] == [b"a-f", b"bbb", b"ccc"]
