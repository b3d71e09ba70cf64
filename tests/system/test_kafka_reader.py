"""Kafka's own reader decodes twinlog's segment files: the batch format is RecordBatch v2.

A real data directory is built through the embedded broker (plain, zstd, a committed
transaction, a compacted topic after compaction; keys, headers, null keys, null
values), then every batch of every segment file is decoded with kafka-python's
``DefaultRecordBatch``, its CRC checked, and compared with what twinlog serves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.log import compact
from twinlog.engine.log.files import SEGMENT_SUFFIX
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import BatchHeader
from twinlog.engine.records.batch_reader import Record, iter_batches

records_module = pytest.importorskip("kafka.record")
MemoryRecords = records_module.MemoryRecords

CONFIG = {"journal_partitions": 1, "offsets_partitions": 1}
TIMESTAMP_MS = 1_700_000_000_000

Seen = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
BatchFields = tuple[int, int, int, int, int]  # base offset, epoch, producer id, epoch, sequence


def keyed_batch(
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    compression: str = "none",
    **producer: int,
) -> bytes:
    builder = RecordBatchBuilder(compression, **producer)
    for number, (key, value, headers) in enumerate(rows):
        builder.append(value, key=key, headers=headers, timestamp_ms=TIMESTAMP_MS + number)
    return builder.build()


def fill(broker: Broker) -> None:
    broker.create_topic("plain")
    broker.produce("plain", 0, keyed_batch([(b"k1", b"v1", [("h", b"x")]), (None, b"v2", [])]))
    broker.produce("plain", 0, keyed_batch([(b"k3", None, [("n", None), ("e", b"")])]))
    broker.create_topic("zstd")
    broker.produce("zstd", 0, keyed_batch([(b"z%d" % n, b"zv" * n, []) for n in range(50)], "zstd"))
    idempotent = broker.init_producer()
    broker.produce(
        "zstd",
        0,
        keyed_batch(
            [(b"i", b"idempotent", [])],
            "zstd",
            producer_id=idempotent.producer_id,
            producer_generation=idempotent.producer_generation,
            base_sequence=0,
        ),
    )
    broker.create_topic("txn")
    producer = broker.init_producer("kafka-reader")
    pid, generation = producer.producer_id, producer.producer_generation
    transaction_id = broker.begin_transaction(pid, generation)
    for sequence in (0, 2):
        batch = keyed_batch(
            [(b"t%d" % sequence, b"committed", [("tx", b"1")]), (None, None, [])],
            "zstd",
            producer_id=pid,
            producer_generation=generation,
            base_sequence=sequence,
            transactional=True,
        )
        broker.produce("txn", 0, batch, transaction_id=transaction_id)
    broker.commit_transaction(transaction_id, pid, generation, wait_for_applied=True)
    broker.create_topic("state", config={"cleanup.policy": "compact", "segment.bytes": "400"})
    for round_number in range(6):
        broker.produce(
            "state",
            0,
            keyed_batch([(b"a", b"a%d" % round_number, []), (b"b", b"b%d" % round_number, [])]),
        )
    broker.produce("state", 0, keyed_batch([(b"a", None, [])]))  # a tombstone
    report = compact(broker.partition(TopicPartition("state", 0)).log)
    assert report.records_dropped > 0  # the proof covers rebuilt batches and fillers too


def served(broker: Broker, topic: str) -> tuple[list[Seen], list[BatchFields]]:
    records: list[Seen] = []
    batches: list[BatchFields] = []
    offset, end = 0, broker.list_offset(topic, 0, "latest")
    fetched = []
    while offset < end:  # a fetch ends at a segment's end
        found = list(iter_batches(broker.fetch(topic, 0, offset, max_bytes=1 << 24).records))
        fetched.extend(found)
        offset = found[-1].header.next_offset
    for batch in fetched:
        header: BatchHeader = batch.header
        batches.append(
            (
                header.base_offset,
                header.partition_leader_epoch,
                header.producer_id,
                header.producer_generation,
                header.base_sequence,
            )
        )
        records.extend(seen(record) for record in batch.records())
    return records, batches


def seen(record: Record) -> Seen:
    headers = tuple((key, value) for key, value in record.headers)
    return record.offset, record.timestamp_ms, record.key, record.value, headers


def decoded_by_kafka(segment_files: list[Path]) -> tuple[list[Seen], list[BatchFields]]:
    records: list[Seen] = []
    batches: list[BatchFields] = []
    for path in segment_files:
        memory = MemoryRecords(path.read_bytes())
        while (batch := memory.next_batch()) is not None:
            assert batch.magic == 2
            assert batch.validate_crc(), f"{path}: batch at {batch.base_offset}"
            batches.append(
                (
                    batch.base_offset,
                    batch.leader_epoch,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                )
            )
            for record in batch:
                headers = tuple((key, value) for key, value in record.headers)
                records.append((record.offset, record.timestamp, record.key, record.value, headers))
    return records, batches


@pytest.mark.parametrize("topic", ["plain", "zstd", "txn", "state"])
def test_kafkas_reader_decodes_every_segment_as_twinlog_serves_it(
    tmp_path: Path, topic: str
) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        fill(broker)
        expected_records, expected_batches = served(broker, topic)
    segment_files = sorted((tmp_path / "logs" / f"{topic}-0").glob(f"*{SEGMENT_SUFFIX}"))
    assert segment_files and expected_records
    records, batches = decoded_by_kafka(segment_files)
    assert records == expected_records
    assert batches == expected_batches
    assert {epoch for _, epoch, *_ in batches} == {0}  # stamped by the log: epoch 0
    if topic == "txn":
        assert all(pid >= 0 and generation == 0 for _, _, pid, generation, _ in batches)
        assert [sequence for *_, sequence in batches] == [0, 2]


def test_kafkas_reader_checks_the_transaction_journal_too(tmp_path: Path) -> None:
    with Broker.open(tmp_path, **CONFIG) as broker:
        fill(broker)
    segment_files = sorted((tmp_path / "logs" / "__txn_journal-0").glob(f"*{SEGMENT_SUFFIX}"))
    _, batches = decoded_by_kafka(segment_files)  # every CRC checked by Kafka's code
    assert batches
