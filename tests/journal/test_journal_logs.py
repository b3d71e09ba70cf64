"""The journal logs in front of LMDB: records, sequence = journal offset, replay from the
applied offset after a crash, a lost tail refused, LMDB rebuilt from the logs, repair
after a failed application, and retention bounded by open transactions."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from copier_support import transactional_batch

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import CorruptJournalError, TransactionCompletedError
from twinlog.engine.broker import Broker
from twinlog.engine.records.batch_builder import RecordBatchBuilder
from twinlog.engine.records.batch_format import validate_batch
from twinlog.journal import CopyState, JournalLogs, LocalJournal
from twinlog.journal import journal_log_records as records
from twinlog.journal.journal_log import JOURNAL_LOG_DIRECTORY, read_records

P0 = "orders-0"


def _open(tmp_path: Path) -> JournalLogs:
    opened = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    opened.open_partition(P0, tmp_path / "logs" / P0)
    return opened


@pytest.fixture(autouse=True)
def _disarm():
    yield
    failpoints.disarm_all()


@pytest.mark.parametrize(
    "record",
    [
        records.Entry(7, 42, 3, 10, b"task-1.0", transactional_batch(7, 10)),
        records.Entry(7, -1, -1, -1, b"", b""),
        records.MarkApplying(7, 100, None),
        records.MarkApplying(7, 100, ()),
        records.MarkApplying(7, 100, (b"a", b"task-2.1")),
        records.MarkApplied(7, 100, 120),
        records.MarkAborted(1 << 40),
        records.Purge(12345),
    ],
)
def test_records_round_trip(record: records.JournalLogRecord) -> None:
    assert records.decode(records.encode(record), "test") == record


@pytest.mark.parametrize("timestamp_ms", [0, 1_700_000_000_123])
@pytest.mark.parametrize("as_view", [False, True])
@pytest.mark.parametrize(
    "record",
    [
        records.Entry(7, 42, 3, 10, b"task-1.0", transactional_batch(7, 10)),
        records.Entry(
            7, 42, 3, 10, b"", transactional_batch(7, 10, record_count=300, value_bytes=900)
        ),
        records.MarkApplying(7, 100, None),
        records.MarkApplying(7, 100, (b"a", b"task-2.1")),
        records.MarkApplied(7, 100, 120),
        records.MarkAborted(1 << 40),
        records.Purge(12345),
    ],
)
def test_the_journal_batch_in_pieces_is_the_builders_batch_and_keeps_the_entrys_batch_uncopied(
    record: records.JournalLogRecord, as_view: bool, timestamp_ms: int
) -> None:
    if as_view and isinstance(record, records.Entry):
        record = dataclasses.replace(record, batch=memoryview(bytes(record.batch)))
    builder = RecordBatchBuilder("none")  # the reference encoder of every batch
    builder.append(records.encode(record), timestamp_ms=timestamp_ms)
    pieces = records.build_batch_pieces(record, timestamp_ms)
    assert b"".join(pieces) == builder.build() == records.build_batch(record, timestamp_ms)
    assert validate_batch(b"".join(pieces)).record_count == 1
    if isinstance(record, records.Entry):
        assert any(piece is record.batch for piece in pieces)  # written as given, not copied


def test_an_entry_read_back_holds_a_view_of_the_value_not_a_copy() -> None:
    value = records.encode(records.Entry(7, 42, 3, 10, b"t", transactional_batch(7, 10)))
    entry = records.decode(value, "test")
    assert isinstance(entry, records.Entry) and isinstance(entry.batch, memoryview)
    assert entry.batch.obj is value


def test_an_entry_journaled_and_read_for_its_copy_is_the_producers_batch(tmp_path: Path) -> None:
    batch = transactional_batch(7, 10, record_count=50)
    with _open(tmp_path) as journal:
        sequence = journal.append(P0, 7, batch)
        (read,) = journal.iter_batches(P0, [sequence])
        assert bytes(read) == batch
        assert validate_batch(journal.journal_log(P0).read(sequence, 1)).record_count == 1


def test_a_record_that_does_not_decode_is_corrupt_journal() -> None:
    with pytest.raises(CorruptJournalError, match="type 9"):
        records.decode(b"\x09", "x")
    with pytest.raises(CorruptJournalError, match="does not decode"):
        records.decode(records.encode(records.MarkApplied(1, 2, 3))[:-1], "x")
    with pytest.raises(CorruptJournalError, match="after the record"):
        records.decode(records.encode(records.MarkAborted(1)) + b"\x00", "x")


def test_the_entry_sequence_is_its_journal_offset(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        batches = [transactional_batch(5, 2 * i) for i in range(3)]
        first = journal.append(P0, 5, batches[0])
        journal.mark_aborted(P0, 9)  # a mark takes an offset too
        later = [journal.append(P0, 5, batch) for batch in batches[1:]]
        assert [first, *later] == [0, 2, 3]
        in_log = list(read_records(journal.journal_log(P0), 0, 4))
        assert [offset for offset, _ in in_log] == [0, 1, 2, 3]
        entries = [(o, r) for o, r in in_log if isinstance(r, records.Entry)]
        assert [o for o, _ in entries] == list(journal.sequences(P0, 5))
        assert [bytes(r.batch) for _, r in entries] == batches  # the producer's bytes unchanged
        assert journal.local.partition_row(P0).next_offset == 4


def test_a_crash_between_the_journal_log_and_lmdb_is_replayed_at_open(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 5, transactional_batch(5, 0))
        failpoints.arm("journal_log.before_apply", "raise")
        with pytest.raises(failpoints.FailpointError):
            journal.append(P0, 5, transactional_batch(5, 2))
        # In the log (in the page cache, as after a SIGKILL), not applied.
        assert journal.journal_log(P0).log_end_offset == 2
        assert journal.transaction(P0, 5).entry_count == 1
    with _open(tmp_path) as journal:
        assert journal.local.partition_row(P0).next_offset == 2
        record = journal.transaction(P0, 5)
        assert record.entry_count == 2 and list(journal.sequences(P0, 5)) == [0, 1]
        journal.check()


def test_open_counts_every_record_replayed_across_queue_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(tmp_path) as journal:
        for sequence in range(5):
            journal.append(P0, 5, transactional_batch(5, sequence))
    shutil.rmtree(tmp_path / "journal")  # LMDB lost: rebuilt from the journal log
    monkeypatch.setattr("twinlog.journal.journal_log.REPLAY_PENDING_MAX", 2)
    with JournalLogs(LocalJournal.open(tmp_path / "journal")) as journal:
        assert journal.open_partition(P0, tmp_path / "logs" / P0) == 5
        assert journal.transaction(P0, 5).entry_count == 5


def test_a_failed_application_is_cut_from_the_journal_log_before_the_next_write(
    tmp_path: Path,
) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 5, transactional_batch(5, 0))
        failpoints.arm("journal.before_sync", "raise")
        with pytest.raises(failpoints.FailpointError):
            journal.append(P0, 5, transactional_batch(5, 2))
        failpoints.disarm_all()
        assert journal.journal_log(P0).log_end_offset == 2  # not cut yet
        assert journal.append(P0, 5, transactional_batch(5, 2)) == 1  # cut, then appended
        assert journal.journal_log(P0).log_end_offset == 2
    with _open(tmp_path) as journal:  # nothing is replayed twice
        assert journal.transaction(P0, 5).entry_count == 2
        journal.check()


def test_a_refused_record_is_a_no_op_in_lmdb_and_in_the_replay(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        journal.mark_aborted(P0, 5)
        with pytest.raises(TransactionCompletedError):
            journal.append(P0, 5, transactional_batch(5, 0))
        assert journal.local.partition_row(P0).next_offset == 2  # applied as a no-op
    # LMDB rebuilt from the log: the same refusal, the same state.
    shutil.rmtree(tmp_path / "journal")
    with _open(tmp_path) as journal:
        assert journal.transaction(P0, 5).state is CopyState.ABORTED
        assert journal.statistics().entry_count == 0


def test_a_journal_log_that_lost_its_tail_below_lmdb_is_refused(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        for i in range(3):
            journal.append(P0, 5, transactional_batch(5, 2 * i))
    log_directory = tmp_path / "logs" / P0
    with _open(tmp_path) as journal:
        journal.journal_log(P0).truncate_to(1)  # as if the disk lost the last two records
    with pytest.raises(CorruptJournalError, match="lost its tail"):
        _open(tmp_path)
    assert (log_directory / JOURNAL_LOG_DIRECTORY).is_dir()  # nothing reset


def test_lmdb_deleted_entirely_is_rebuilt_from_the_journal_logs(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        for i in range(3):
            journal.append(P0, 5, transactional_batch(5, 2 * i))
            journal.append(P0, 6, transactional_batch(6, 2 * i), attempt=b"t-1")
        journal.mark_applying(P0, 5, 40)
        journal.mark_aborted(P0, 6)
        journal.append(P0, 8, transactional_batch(8, 0))
        journal.purge_partition_below(P0, 7)
        before = {r.transaction_id: r for r in journal.transactions(P0)}
        sequences = list(journal.sequences(P0, 5))
    shutil.rmtree(tmp_path / "journal")
    with _open(tmp_path) as journal:
        assert {r.transaction_id: r for r in journal.transactions(P0)} == before
        assert list(journal.sequences(P0, 5)) == sequences
        assert journal.local.partition_row(P0).purged_below == 7
        journal.check()


def test_retention_keeps_segments_of_open_and_applying_transactions(tmp_path: Path) -> None:
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    journal.open_partition(P0, tmp_path / "logs" / P0, batch_bytes_max=1 << 16, segment_bytes=600)
    try:
        data_log = journal.journal_log(P0)
        journal.append(P0, 1, transactional_batch(1, 0, value_bytes=300))  # APPLYING later
        journal.append(P0, 2, transactional_batch(2, 0, value_bytes=300))  # aborted: done
        journal.mark_aborted(P0, 2)
        for i in range(4):
            journal.append(P0, 3, transactional_batch(3, 2 * i, value_bytes=300))
        journal.mark_applying(P0, 1, 0)
        journal.mark_aborted(P0, 3)
        assert len(list((tmp_path / "logs" / P0 / JOURNAL_LOG_DIRECTORY).glob("*.log"))) > 2
        assert journal.retention_bound(P0) == 0  # transaction 1's entry is at offset 0
        assert journal.apply_retention(P0) == 0
        assert data_log.log_start_offset == 0
        end = data_log.log_end_offset
        journal.mark_applied(P0, 1, 0, 2)
        assert journal.retention_bound(P0) == end + 1  # all complete: the applied offset
        assert journal.apply_retention(P0) > 0
        assert 0 < data_log.log_start_offset <= end + 1
    finally:
        journal.close()
    with _open(tmp_path) as reopened:  # what is left still replays from the applied offset
        assert reopened.transaction(P0, 1).state is CopyState.APPLIED


def test_in_the_journal_log_sync_mode_retention_syncs_lmdb_before_it_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LMDB commits unsynced ("journal_log"): after a power loss it may come back with an
    older applied offset, so the records from there on must still be in the log. Retention
    therefore syncs LMDB after reading its bound and before deleting anything."""
    local = LocalJournal.open(tmp_path / "journal", sync_mode="journal_log")
    journal = JournalLogs(local)
    journal.open_partition(P0, tmp_path / "logs" / P0, batch_bytes_max=1 << 16, segment_bytes=600)
    events: list[str] = []
    real_sync = local.sync_to_disk
    data_log = journal.journal_log(P0)
    real_delete = data_log.delete_segments_before

    def sync() -> None:
        events.append("sync")
        real_sync()

    def delete(offset: int) -> int:
        events.append(f"delete below {offset}")
        return real_delete(offset)

    monkeypatch.setattr(local, "sync_to_disk", sync)
    monkeypatch.setattr(data_log, "delete_segments_before", delete)
    try:
        for i in range(4):
            journal.append(P0, 3, transactional_batch(3, i, value_bytes=300))
        journal.mark_aborted(P0, 3)
        bound = journal.retention_bound(P0)
        assert journal.apply_retention(P0) > 0
        assert events == ["sync", f"delete below {bound}"]
    finally:
        journal.close()
    with _open(tmp_path) as reopened:  # the unsynced mode still replays and reopens
        assert reopened.transaction(P0, 3).state is CopyState.ABORTED


def test_the_broker_leaves_lmdb_durability_to_the_journal_logs_by_default(
    tmp_path: Path,
) -> None:
    with Broker.open(tmp_path / "data") as broker:
        assert broker.journal.local.config.sync_mode == "journal_log"
    with Broker.open(tmp_path / "data", journal_sync_mode="commit") as broker:
        assert broker.journal.local.config.sync_mode == "commit"
