"""The high watermark bounds every read a consumer can make (CLUSTER.md I1).

The partition's HW is held below its log end (as a follower that has not fetched
would hold it in a cluster); no read path may return a record at or past it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from twinlog.connectors.spark.log_access import BrokerLogAccess, DirectoryLogAccess
from twinlog.engine.base.crc32c import crc32c
from twinlog.engine.base.errors import NotEnoughReplicasAfterAppendError, OffsetOutOfRangeError
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.broker import Broker
from twinlog.engine.log.high_watermark import (
    HIGH_WATERMARK_FILE,
    HighWatermark,
    read_high_watermark,
)
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_reader import iter_batches
from twinlog.rpc.client import Consumer, Producer

TOPIC = "hw"
TP = TopicPartition(TOPIC, 0)
HELD = 4  # two committed batches of two records


def batch(*values: bytes, timestamp_ms: int = 1_000) -> bytes:
    builder = RecordBatchBuilder("none")
    for index, value in enumerate(values):
        builder.append(value, timestamp_ms=timestamp_ms + index)
    return builder.build()


def offsets_in(records: bytes) -> list[int]:
    return [r.offset for b in iter_batches(records) for r in b.records()]


def fetch_all(broker: Broker, offset: int = 0) -> list[int]:
    """Every offset fetchable from ``offset`` (a fetch may end early, at a copy's edge)."""
    found: list[int] = []
    while True:
        records = broker.fetch(TOPIC, 0, offset, max_bytes=1 << 20).records
        if not records:
            return found
        found.extend(offsets_in(records))
        offset = found[-1] + 1


@pytest.fixture
def held(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A broker whose partition holds offsets 0..7 (plain and copied) and a HW of 4."""
    # acks=all: a write past a held HW is written but never acknowledged (a leader whose
    # followers are stuck), so the wait for it is short
    broker = Broker.open(
        tmp_path / "data", transaction_check_interval_ms=60_000, replica_ack_timeout_ms=50
    )
    broker.create_topic(TOPIC, 1)
    broker.produce(TOPIC, 0, batch(b"a0", b"a1"))
    broker.produce(TOPIC, 0, batch(b"b0", b"b1"))
    partition = broker.partition(TopicPartition(TOPIC, 0))
    assert partition.high_watermark.value == HELD
    partition.replicated_end = lambda: HELD  # type: ignore[method-assign]
    # The copier's wait for its copy's replicas is let through (these tests are about what
    # readers see), so a copy past the HW is recorded APPLIED and the next write goes on.
    partition.writer.wait_replicated = lambda end_offset: None
    with pytest.raises(NotEnoughReplicasAfterAppendError):  # plain, past the HW
        broker.produce(TOPIC, 0, batch(b"c0", b"c1", timestamp_ms=5_000))
    with Producer(broker, transactional_id="past-hw") as producer:  # a copy, past the HW
        producer.init_transactions()
        with producer.transaction():
            producer.send(TOPIC, b"d0", partition=0)
            producer.send(TOPIC, b"d1", partition=0)
        producer.flush()
    deadline = time.monotonic() + 10
    while partition.log.log_end_offset < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert partition.log.log_end_offset >= 8
    assert partition.high_watermark.value == HELD
    yield broker
    broker.close()


def test_fetch_stops_at_the_high_watermark(held: Broker) -> None:
    result = held.fetch(TOPIC, 0, 0, max_bytes=1 << 20)
    assert offsets_in(result.records) == [0, 1, 2, 3]
    assert result.log_end_offset == HELD
    assert fetch_all(held) == [0, 1, 2, 3]
    assert held.fetch(TOPIC, 0, HELD, max_bytes=1 << 20).records == b""
    # Between the HW and the log end (Kafka's rule): a valid offset that answers nothing yet.
    between = held.fetch(TOPIC, 0, HELD + 2, max_bytes=1 << 20)
    assert between.records == b"" and between.log_end_offset == HELD
    log_end = held.partition(TopicPartition(TOPIC, 0)).log.log_end_offset
    with pytest.raises(OffsetOutOfRangeError) as raised:
        held.fetch(TOPIC, 0, log_end + 1, max_bytes=1 << 20)
    assert raised.value.log_end_offset == HELD  # where a consumer may seek: the HW


def test_group_lag_and_the_metric_count_to_the_high_watermark(held: Broker) -> None:
    partition = held.partition(TopicPartition(TOPIC, 0))
    held.commit_offsets("lagging", {TP: 1})
    stats = held.stats()
    (ours,) = [p for p in stats.partitions if p.topic_partition == TP]
    assert ours.high_watermark == HELD and ours.log_end_offset == partition.log.log_end_offset
    (lag,) = [g for g in stats.group_lags if g.group_id == "lagging"]
    assert lag.lag == HELD - 1  # not log end - 1: the group cannot read past the HW


def produce_unacknowledged(broker: Broker, value: bytes) -> None:
    """A write past the held HW: appended, never acknowledged (acks=all)."""
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        broker.produce(TOPIC, 0, batch(value))


def test_a_long_poll_is_not_woken_by_appends_past_the_high_watermark(held: Broker) -> None:
    appender = threading.Timer(0.05, lambda: produce_unacknowledged(held, b"e0"))
    appender.start()
    started = time.monotonic()
    result = held.fetch(TOPIC, 0, HELD, max_bytes=1 << 20, max_wait_ms=300)
    appender.join()
    assert result.records == b""
    assert time.monotonic() - started >= 0.25  # it waited out its time, not woken to read
    assert held.partition(TopicPartition(TOPIC, 0)).log.log_end_offset == 9


def test_list_offset_and_describe_answer_the_high_watermark(held: Broker) -> None:
    assert held.list_offset(TOPIC, 0, "latest") == HELD
    assert held.list_offset(TOPIC, 0, 5_000) == HELD  # c0's timestamp: past the HW
    assert held.list_offset(TOPIC, 0, 1_000) == 0
    assert held.describe_topic(TOPIC).partitions[0].log_end_offset == HELD


def test_a_consumer_reads_and_positions_below_the_high_watermark(held: Broker) -> None:
    with Consumer(held, fetch_max_wait_ms=50) as consumer:
        consumer.assign([TP])
        consumer.seek_to_beginning()
        values = []
        for _ in range(5):
            values.extend(record.value for record in consumer.poll(100))
        assert values == [b"a0", b"a1", b"b0", b"b1"]
        assert consumer.position(TP) == HELD
        consumer.seek_to_end()
        assert consumer.position(TP) == HELD


def test_a_spark_scan_reads_below_the_high_watermark(held: Broker) -> None:
    assert read_high_watermark(held.data_dir / "logs" / str(TP)) == HELD
    through_broker = BrokerLogAccess(held, 1 << 20)  # type: ignore[arg-type]
    from_files = DirectoryLogAccess(str(held.data_dir))
    for access in (through_broker, from_files):
        assert access.describe(TOPIC) == [(0, HELD)]
        read = [header.base_offset for header, _ in access.batches(TP, 0, HELD, True)]
        assert read == [0, 2]
        assert access.offset_for_timestamp(TP, 5_000, True) is None  # c0 is past the HW
    # A file reader asked for more than it was planned never passes the HW either.
    reader = from_files._reader(TP)
    assert reader.end_offset() == HELD
    assert [h.base_offset for h, _ in reader.iter_batches(0)] == [0, 2]


def test_released_the_high_watermark_reaches_the_log_end_and_its_file_says_so(
    held: Broker,
) -> None:
    partition = held.partition(TopicPartition(TOPIC, 0))
    del partition.replicated_end  # back to the one-node rule: the log end
    held.produce(TOPIC, 0, batch(b"f0"))
    end = partition.log.log_end_offset
    assert partition.high_watermark.value == end
    assert held.list_offset(TOPIC, 0, "latest") == end
    assert read_high_watermark(partition.directory) is None  # no bound: the log end
    assert fetch_all(held) == list(range(end))


class Bounds:
    def __init__(self, start: int, end: int) -> None:
        self.log_start_offset, self.log_end_offset = start, end


def test_the_high_watermark_never_decreases_but_by_truncation(tmp_path: Path) -> None:
    bounds = Bounds(0, 10)
    (tmp_path / HIGH_WATERMARK_FILE).write_bytes(b"left by an earlier run\n")
    high_watermark = HighWatermark(bounds, tmp_path)
    assert high_watermark.value == 10
    assert read_high_watermark(tmp_path) is None  # the earlier run's file is gone
    assert high_watermark.advance_to(5) == 10  # a late report: ignored
    bounds.log_end_offset = 20
    assert high_watermark.advance_to(15) == 15
    assert read_high_watermark(tmp_path) == 15  # behind the log end: published
    with pytest.raises(AssertionError, match="past the log end"):
        high_watermark.advance_to(21)
    high_watermark.truncate_to(12)
    assert high_watermark.value == 12
    assert read_high_watermark(tmp_path) == 12
    assert high_watermark.advance_to(20) == 20
    assert read_high_watermark(tmp_path) is None


def test_a_damaged_high_watermark_file_reads_as_nothing_committed(tmp_path: Path) -> None:
    (tmp_path / HIGH_WATERMARK_FILE).write_bytes(b"high_watermark 9\ncrc32c 00000000\n")
    assert read_high_watermark(tmp_path) == 0


def test_the_file_is_written_only_when_what_it_says_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader calls advance_to after every append, mostly without moving the HW while
    its replicas catch up: each call used to replace the file again. A value and "the
    log end" rewrite it in place: one inode throughout."""
    import twinlog.engine.log.high_watermark as high_watermark_module

    written: list[bytes] = []
    real_write = high_watermark_module.write_in_place

    def counting_write(path: Path, contents: bytes) -> None:
        written.append(contents)
        real_write(path, contents)

    monkeypatch.setattr(high_watermark_module, "write_in_place", counting_write)
    bounds = Bounds(0, 10)
    high_watermark = HighWatermark(bounds, tmp_path)
    for end in range(11, 16):  # appends past a HW that stays at 10
        bounds.log_end_offset = end
        high_watermark.advance_to(10)
    assert len(written) == 1 and read_high_watermark(tmp_path) == 10
    inode = (tmp_path / HIGH_WATERMARK_FILE).stat().st_ino
    high_watermark.advance_to(12)
    assert len(written) == 2 and read_high_watermark(tmp_path) == 12
    high_watermark.advance_to(15)  # caught up: the file says the log end
    assert len(written) == 3 and read_high_watermark(tmp_path) is None
    high_watermark.advance_to(15)  # and says it once
    assert len(written) == 3
    bounds.log_end_offset = 16
    high_watermark.advance_to(15)  # behind again: the same value as before
    assert len(written) == 4 and read_high_watermark(tmp_path) == 15
    assert (tmp_path / HIGH_WATERMARK_FILE).stat().st_ino == inode
    assert len({len(contents) for contents in written}) == 1


def test_a_reader_that_meets_a_rewrite_reads_again(tmp_path: Path) -> None:
    """A torn read (here: the file replaced by a damaged copy, made whole 2 ms later)
    is read again instead of taken for "nothing committed"."""
    bounds = Bounds(0, 20)
    high_watermark = HighWatermark(bounds, tmp_path)
    high_watermark.truncate_to(7)
    path = tmp_path / HIGH_WATERMARK_FILE
    whole = path.read_bytes()
    path.write_bytes(whole.replace(b"7\n", b"8\n", 1))
    timer = threading.Timer(0.002, lambda: path.write_bytes(whole))
    timer.start()
    try:
        assert read_high_watermark(tmp_path) == 7
    finally:
        timer.join()


def test_an_older_unpadded_file_is_read(tmp_path: Path) -> None:
    body = b"high_watermark 9\n"
    (tmp_path / HIGH_WATERMARK_FILE).write_bytes(body + b"crc32c %08x\n" % crc32c(body))
    assert read_high_watermark(tmp_path) == 9
