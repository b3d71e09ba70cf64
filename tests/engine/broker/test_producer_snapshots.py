"""Producer-state snapshots: written as the log grows, used at open for the log before
them (only the log after the newest is read), refused whenever they no longer describe
the log (a cut and rewritten history, a damaged file), and never needed: the table they
give is the one a scan of the whole log gives."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker import producer_snapshots
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.producer_snapshots import ProducerSnapshots
from twinlog.engine.broker.producer_state import SequenceTracker
from twinlog.engine.log import DataLog, LogConfig
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import BatchHeader, read_header

INTERVAL_BYTES = 4096  # a snapshot every ~4 batches of the ones below


def _batch(producer_id: int, sequence: int, generation: int = 0) -> bytes:
    """3 records of ~300 bytes from ``producer_id``, sequences from ``sequence``."""
    builder = RecordBatchBuilder(
        "none", producer_id=producer_id, producer_generation=generation, base_sequence=sequence
    )
    for number in range(3):
        builder.append(b"v%d-" % (sequence + number) + b"x" * 300, timestamp_ms=1_700_000_000_000)
    return builder.build()


def _table(tracker: SequenceTracker) -> dict[int, tuple[int, list[tuple[int, int, int]], int]]:
    return {
        producer_id: (
            sequences.producer_generation,
            list(sequences.recent),
            sequences.last_timestamp_ms,
        )
        for producer_id, sequences in tracker.producers.items()
    }


def _full_scan(log: DataLog) -> SequenceTracker:
    tracker = SequenceTracker()
    for header in log.iter_headers(log.log_start_offset):
        tracker.observe(header, header.base_offset)
    return tracker


def _write(
    log: DataLog, snapshots: ProducerSnapshots, tracker: SequenceTracker, count: int, start: int = 0
) -> None:
    """``count`` batches of 3 producers in turn, as a partition writes plain batches."""
    for number in range(start, start + count):
        producer_id = 100 + number % 3
        batch = _batch(producer_id, (number // 3) * 3)
        base_offset = log.append_as_leader(batch)
        tracker.observe(read_header(batch), base_offset)
        snapshots.after_append(tracker)


@pytest.fixture(autouse=True)
def small_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(producer_snapshots, "SNAPSHOT_INTERVAL_BYTES", INTERVAL_BYTES)


def _observed_while_loading(
    monkeypatch: pytest.MonkeyPatch, snapshots: ProducerSnapshots
) -> tuple[SequenceTracker, int]:
    """(the loaded table, how many batches the load read from the log)."""
    seen = [0]
    original = SequenceTracker.observe

    def counting(self: SequenceTracker, header: BatchHeader, base_offset: int) -> None:
        seen[0] += 1
        original(self, header, base_offset)

    monkeypatch.setattr(SequenceTracker, "observe", counting)
    try:
        return snapshots.load(), seen[0]
    finally:
        monkeypatch.setattr(SequenceTracker, "observe", original)


def test_an_open_reads_only_the_log_after_the_newest_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DataLog.open(tmp_path, LogConfig()) as log:
        snapshots = ProducerSnapshots("t-0", tmp_path, log)
        tracker = snapshots.load()
        _write(log, snapshots, tracker, 30)
        for number in range(2):  # written after the newest snapshot, then the crash
            batch = _batch(200, number * 3)
            tracker.observe(read_header(batch), log.append_as_leader(batch))
        files = sorted(tmp_path.glob("producer-state-*.json"))
        assert len(files) == producer_snapshots.SNAPSHOTS_KEPT  # older ones deleted
        newest = max(int(path.name[15:35]) for path in files)
        behind = sum(1 for header in log.iter_headers(newest))
        assert 2 <= behind < 32
        loaded, read = _observed_while_loading(monkeypatch, ProducerSnapshots("t-0", tmp_path, log))
        assert read == behind  # not the 32 batches: the snapshot stood for the rest
        assert _table(loaded) == _table(_full_scan(log)) == _table(tracker)


def test_a_snapshot_of_a_history_cut_and_written_again_is_not_used(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, LogConfig()) as log:
        snapshots = ProducerSnapshots("t-0", tmp_path, log)
        tracker = snapshots.load()
        _write(log, snapshots, tracker, 12)
        newest = max(tmp_path.glob("producer-state-*.json"))
        offset = int(newest.name[15:35])
        # a follower's truncation below it, then other batches past it: the same offsets,
        # another history (another producer's sequences)
        log.truncate_to(offset - 3)
        while log.log_end_offset <= offset + 6:
            log.append_as_leader(_batch(900, log.log_end_offset))
        loaded = ProducerSnapshots("t-0", tmp_path, log).load()
        assert _table(loaded) == _table(_full_scan(log))
        assert 900 in loaded.producers
        assert not newest.exists()  # skipped and deleted


def test_a_damaged_snapshot_is_skipped_and_the_log_read(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, LogConfig()) as log:
        snapshots = ProducerSnapshots("t-0", tmp_path, log)
        tracker = snapshots.load()
        _write(log, snapshots, tracker, 12)
        for path in tmp_path.glob("producer-state-*.json"):
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x01
            path.write_bytes(bytes(data))
        loaded = ProducerSnapshots("t-0", tmp_path, log).load()
        assert _table(loaded) == _table(_full_scan(log)) == _table(tracker)
        assert not list(tmp_path.glob("producer-state-*.json"))


def test_the_snapshot_before_this_format_is_read_once(tmp_path: Path) -> None:
    with DataLog.open(tmp_path, LogConfig()) as log:
        tracker = SequenceTracker()
        for number in range(4):
            batch = _batch(7, number * 3)
            tracker.observe(read_header(batch), log.append_as_leader(batch))
        legacy = tmp_path / producer_snapshots.LEGACY_SNAPSHOT_FILE
        body = producer_snapshots.encode(tracker, log.log_end_offset, None).decode()
        legacy.write_text(
            body.replace('"offset"', '"log_end_offset"').replace('"last_batch": null, ', "")
        )
        loaded = ProducerSnapshots("t-0", tmp_path, log).load()
        assert _table(loaded) == _table(tracker)
        assert not legacy.exists()


def test_a_broker_killed_after_many_snapshots_still_recognises_a_retry(tmp_path: Path) -> None:
    """End to end: a SIGKILL, then the retry of the batch written last is a duplicate,
    answered with its offset, and the next batch is accepted."""
    directory = tmp_path / "data"
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            producer_snapshots.SNAPSHOT_INTERVAL_BYTES = INTERVAL_BYTES
            broker = Broker.open(directory)
            broker.create_topic("t", partitions=1)
            identity = broker.init_producer()
            for number in range(40):
                batch = _batch(identity.producer_id, number * 3, identity.producer_generation)
                broker.produce("t", 0, batch)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, wait_status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(wait_status)
    folder = directory / "logs" / "t-0"
    assert len(list(folder.glob("producer-state-*.json"))) == producer_snapshots.SNAPSHOTS_KEPT
    with Broker.open(directory) as broker:
        partition = broker.partition(TopicPartition("t", 0))
        assert _table(partition.sequences) == _table(_full_scan(partition.log))
        ((producer_id, sequences),) = partition.sequences.producers.items()
        generation = sequences.producer_generation
        retried = broker.produce("t", 0, _batch(producer_id, 39 * 3, generation))
        assert retried.duplicate and retried.base_offset == sequences.recent[-1][2]
        assert not broker.produce("t", 0, _batch(producer_id, 40 * 3, generation)).duplicate
