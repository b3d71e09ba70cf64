"""The local data journal on real LMDB files, written through the partitions' journal
logs: entries and their reverse links, the transaction index, refused late appends,
purge, statistics, damage and reopening."""

from __future__ import annotations

from pathlib import Path

import pytest
from copier_support import PRODUCER_ID, plain_batch, transactional_batch

from twinlog.engine.base.errors import (
    CorruptJournalError,
    InvalidTxnStateError,
    TransactionCompletedError,
    TwinlogError,
)
from twinlog.journal import CopyState, JournalConfig, JournalLogs, LocalJournal
from twinlog.journal import journal_log_records as records
from twinlog.journal.local_format import NO_OFFSET, NO_PREVIOUS
from twinlog.journal.local_ops import JournalOrderError

P0, P1 = "orders-0", "orders-1"


def _open(tmp_path: Path, config: JournalConfig | None = None) -> JournalLogs:
    """LMDB in tmp_path/journal, the journal logs of P0 and P1 in tmp_path/logs/NAME/journal."""
    opened = JournalLogs(LocalJournal.open(tmp_path / "journal", config))
    for name in (P0, P1):
        opened.open_partition(name, tmp_path / "logs" / name)
    return opened


@pytest.fixture
def journal(tmp_path: Path):
    opened = _open(tmp_path)
    yield opened
    opened.close()


def _nothing_changed(journal: JournalLogs, before) -> None:
    after = journal.statistics()
    assert (after.entry_count, after.pending_by_partition) == (
        before.entry_count,
        before.pending_by_partition,
    )


def test_entries_link_back_to_the_previous_entry_of_their_transaction(
    journal: JournalLogs,
) -> None:
    # Two transactions interleaved on one partition, a third on another.
    a0 = journal.append(P0, 10, transactional_batch(10, 0))
    b0 = journal.append(P0, 11, transactional_batch(11, 0))
    a1 = journal.append(P0, 10, transactional_batch(10, 2))
    c0 = journal.append(P1, 10, transactional_batch(10, 4))
    a2 = journal.append(P0, 10, transactional_batch(10, 6), attempt=b"task-3.1")
    assert (a0, b0, a1, a2) == (0, 1, 2, 3)  # sequences are per partition: journal offsets
    assert c0 == 0
    assert journal.journal_log(P0).log_end_offset == 4

    entries = [journal.entry(P0, s) for s in (a0, a1, a2)]
    assert [e.previous for e in entries] == [NO_PREVIOUS, a0, a1]
    assert journal.entry(P0, b0).previous == NO_PREVIOUS
    assert [e.transaction_id for e in entries] == [10, 10, 10]
    assert entries[2].attempt == b"task-3.1" and entries[0].attempt == b""
    assert entries[1].batch == transactional_batch(10, 2)
    assert (entries[1].producer_id, entries[1].producer_generation, entries[1].base_sequence) == (
        PRODUCER_ID,
        1,
        2,
    )
    assert list(journal.sequences(P0, 10)) == [a0, a1, a2]
    assert list(journal.sequences(P1, 10)) == [c0]
    journal.check()


def test_index_row_counts_entries_bytes_and_records(journal: JournalLogs) -> None:
    batches = [transactional_batch(5, 2 * i, record_count=2) for i in range(3)]
    for batch in batches:
        journal.append(P0, 5, batch)
    record = journal.transaction(P0, 5)
    assert record is not None
    assert record.state is CopyState.OPEN
    assert (record.first_sequence, record.last_sequence, record.entry_count) == (0, 2, 3)
    assert record.size_bytes == sum(map(len, batches))
    assert record.record_count == 6
    assert (record.first_offset, record.next_offset) == (NO_OFFSET, NO_OFFSET)
    assert journal.transaction(P0, 6) is None and journal.transaction("nope-0", 5) is None


def test_streamed_batches_are_the_journaled_ones_in_order(journal: JournalLogs) -> None:
    batches = [transactional_batch(5, i) for i in range(5)]
    for batch in batches:
        journal.append(P0, 5, batch)
        journal.append(P0, 6, transactional_batch(6, 0))  # noise in between
    streamed = [bytes(view) for view in journal.iter_batches(P0, journal.sequences(P0, 5))]
    assert streamed == batches
    assert [
        h.base_sequence for h in journal.iter_batch_headers(P0, journal.sequences(P0, 5))
    ] == list(range(5))


@pytest.mark.parametrize("end", ["applied", "aborted", "applying"])
def test_append_after_the_end_is_refused_and_writes_nothing(journal: JournalLogs, end: str) -> None:
    journal.append(P0, 7, transactional_batch(7, 0))
    sequences = journal.sequences(P0, 7)
    if end == "applied":
        journal.mark_applying(P0, 7, 0)
        assert len(sequences) == 1
        journal.mark_applied(P0, 7, 0, 2)
    elif end == "aborted":
        journal.mark_aborted(P0, 7)
    else:
        journal.mark_applying(P0, 7, 0)
    before = journal.statistics()
    with pytest.raises(TransactionCompletedError, match="refused and was not journaled"):
        journal.append(P0, 7, transactional_batch(7, 2))
    _nothing_changed(journal, before)
    journal.check()


def test_abort_of_a_transaction_unknown_here_records_it_and_refuses_later_appends(
    journal: JournalLogs,
) -> None:
    record = journal.mark_aborted(P0, 8)
    assert record.state is CopyState.ABORTED and record.entry_count == 0
    with pytest.raises(TransactionCompletedError):
        journal.append(P0, 8, transactional_batch(8, 0))
    assert journal.statistics().entry_count == 0


def test_abort_deletes_every_entry_and_keeps_other_transactions(journal: JournalLogs) -> None:
    for i in range(4):
        journal.append(P0, 1, transactional_batch(1, i))
        journal.append(P0, 2, transactional_batch(2, i))
    journal.mark_aborted(P0, 1)
    assert journal.statistics().pending_by_partition == {
        P0: (4, 4 * len(transactional_batch(2, 0)))
    }
    assert journal.sequences(P0, 1).tolist() == []
    assert len(journal.sequences(P0, 2)) == 4
    again = journal.mark_aborted(P0, 1)  # idempotent
    assert again.state is CopyState.ABORTED
    journal.check()


def test_state_changes_outside_the_table_are_refused(journal: JournalLogs) -> None:
    journal.append(P0, 3, transactional_batch(3, 0))
    with pytest.raises(InvalidTxnStateError, match="OPEN; it cannot become APPLIED"):
        journal.mark_applied(P0, 3, 0, 2)
    journal.mark_applying(P0, 3, 5, attempts=[b"a"])
    with pytest.raises(InvalidTxnStateError, match="APPLYING; it cannot become ABORTED"):
        journal.mark_aborted(P0, 3)
    with pytest.raises(InvalidTxnStateError, match="no entries"):
        journal.mark_applying(P0, 99, 0)
    with pytest.raises(InvalidTxnStateError, match="may only restart lower"):
        journal.mark_applying(P0, 3, 5)
    restarted = journal.mark_applying(P0, 3, 2, attempts=[b"other"])  # the log lost its tail
    assert (restarted.first_offset, restarted.attempts) == (2, (b"a",))  # the choice is kept
    # LMDB applies only the next record of the journal log, once.
    applied_end = journal.journal_log(P0).log_end_offset
    mark = records.MarkApplied(3, 0, 2)
    with pytest.raises(JournalOrderError, match=f"applies record {applied_end} next"):
        journal.local.enqueue_record(P0, applied_end - 1, mark).wait()
    with pytest.raises(JournalOrderError):
        journal.local.enqueue_record(P0, applied_end + 1, mark).wait()
    assert journal.transaction(P0, 3).state is CopyState.APPLYING
    journal.check()


def test_a_batch_that_is_not_transactional_is_refused(journal: JournalLogs) -> None:
    # The batch names no transaction (Kafka's format has no such field): the entry takes the
    # caller's, so the one thing to check in the batch is that it is transactional at all.
    with pytest.raises(InvalidTxnStateError, match="transaction 5 is not transactional"):
        journal.append(P0, 5, plain_batch(4))
    assert journal.statistics().entry_count == 0
    journal.append(P0, 5, transactional_batch(4, 0))
    assert journal.entry(P0, journal.sequences(P0, 5)[0]).transaction_id == 5  # the caller's


def test_purge_drops_leftovers_and_completed_rows_below_the_watermark(
    journal: JournalLogs,
) -> None:
    journal.append(P0, 1, transactional_batch(1, 0))  # leftover: OPEN, coordinator forgot it
    journal.append(P1, 1, transactional_batch(1, 0))
    journal.append(P0, 2, transactional_batch(2, 0))  # aborted
    journal.mark_aborted(P0, 2)
    journal.mark_applied(P0, 3, 0, 0)  # applied (empty)
    journal.append(P0, 4, transactional_batch(4, 0))  # applying: never dropped
    journal.mark_applying(P0, 4, 0)
    journal.append(P0, 9, transactional_batch(9, 0))  # above the watermark: kept
    assert journal.purge_below(5) == 2
    assert journal.transaction(P0, 1) is None and journal.transaction(P1, 1) is None
    assert journal.transaction(P0, 2) is None and journal.transaction(P0, 3) is None
    assert journal.transaction(P0, 4).state is CopyState.APPLYING
    assert journal.transaction(P0, 9).state is CopyState.OPEN
    assert journal.statistics().entry_count == 2
    journal.check()
    # A batch that arrives for a forgotten transaction must not linger either.
    with pytest.raises(TransactionCompletedError, match="purge watermark 5"):
        journal.append(P0, 1, transactional_batch(1, 2))
    # The watermark only rises.
    assert journal.purge_below(2) == 0
    with pytest.raises(TransactionCompletedError):
        journal.append(P0, 3, transactional_batch(3, 2))


def test_statistics_count_entries_transactions_and_partitions(journal: JournalLogs) -> None:
    batch = transactional_batch(1, 0)
    for _ in range(3):
        journal.append(P0, 1, batch)
    journal.append(P1, 2, transactional_batch(2, 0))
    journal.mark_aborted(P0, 5)
    stats = journal.statistics()
    assert stats.entry_count == 4
    assert stats.open_transactions == 2
    assert stats.pending_by_partition == {
        P0: (3, 3 * len(batch)),
        P1: (1, len(transactional_batch(2, 0))),
    }
    assert stats.size_bytes > 0 and stats.map_size_bytes >= stats.size_bytes
    assert stats.requests_committed == 5


def test_everything_survives_a_reopen(tmp_path: Path) -> None:
    with _open(tmp_path) as journal:
        for i in range(3):
            journal.append(P0, 5, transactional_batch(5, i))
        journal.mark_aborted(P0, 2)
        journal.purge_below(3)
        assert journal.journal_log(P0).log_end_offset == 5  # 3 entries, a mark, a purge
    with _open(tmp_path) as journal:
        assert len(journal.sequences(P0, 5)) == 3
        assert journal.append(P0, 5, transactional_batch(5, 3)) == 5  # sequences continue
        with pytest.raises(TransactionCompletedError):
            journal.append(P0, 2, transactional_batch(2, 0))
        journal.check()


def test_sequences_are_never_reused_after_deletes(journal: JournalLogs) -> None:
    journal.append(P0, 1, transactional_batch(1, 0))
    journal.mark_aborted(P0, 1)  # journal offset 1
    assert journal.append(P0, 2, transactional_batch(2, 0)) == 2


def test_a_second_open_of_the_same_directory_is_refused(tmp_path: Path) -> None:
    with (
        LocalJournal.open(tmp_path / "journal"),
        pytest.raises(TwinlogError, match="open in another"),
    ):
        LocalJournal.open(tmp_path / "journal")


def test_closed_journal_refuses_calls(tmp_path: Path) -> None:
    journal = _open(tmp_path)
    journal.close()
    journal.close()  # idempotent
    with pytest.raises(TwinlogError, match="closed"):
        journal.append(P0, 1, transactional_batch(1, 0))
    with pytest.raises(TwinlogError, match="closed"):
        journal.transaction(P0, 1)


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b"this is not an LMDB file" * 400),
        lambda path: path.write_bytes(path.read_bytes()[:100]),
    ],
    ids=["garbage", "truncated"],
)
def test_damaged_environment_raises_corrupt_journal_with_path_and_advice(
    tmp_path: Path, damage
) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 1, transactional_batch(1, 0))
    damage(tmp_path / "journal" / "data.mdb")
    with pytest.raises(CorruptJournalError) as caught:
        LocalJournal.open(tmp_path / "journal")
    message = str(caught.value)
    assert str(tmp_path / "journal") in message and "copy the directory aside" in message


def test_broken_chain_raises_corrupt_journal(journal: JournalLogs) -> None:
    for i in range(3):
        journal.append(P0, 1, transactional_batch(1, i))
    # Delete the middle entry behind the journal's back (a damaged file, in effect).
    local = journal.local
    with local._env.begin(write=True) as txn:
        assert txn.delete(bytes(4) + (1).to_bytes(8, "big"), db=local._databases[b"entries"])
    with pytest.raises(CorruptJournalError, match="entry 1 of orders-0 is missing"):
        journal.sequences(P0, 1)
    with pytest.raises(CorruptJournalError):
        journal.check()


def test_argument_checks(journal: JournalLogs) -> None:
    with pytest.raises(InvalidTxnStateError, match="partition name"):
        journal.local.enqueue_record("", 0, records.make_entry(1, transactional_batch(1, 0)))
    with pytest.raises(InvalidTxnStateError, match="negative"):
        journal.append(P0, -1, transactional_batch(-1, 0))
    with pytest.raises(InvalidTxnStateError, match="attempt tag"):
        journal.append(P0, 1, transactional_batch(1, 0), attempt=bytes(70_000))


def test_tagged_headers_name_each_entrys_attempt(journal: JournalLogs) -> None:
    journal.append(P0, 4, transactional_batch(4, 0), attempt=b"task-2.0")
    journal.append(P0, 4, transactional_batch(4, 2))
    tagged = list(journal.iter_tagged_headers(P0, journal.sequences(P0, 4)))
    assert [(attempt, header.base_sequence) for attempt, header in tagged] == [
        (b"task-2.0", 0),
        (b"", 2),
    ]


def test_the_data_file_backs_the_whole_map_so_a_stray_read_is_no_sigbus(tmp_path: Path) -> None:
    # A damaged page can send LMDB past the data file's end inside its map; reading there
    # was SIGBUS. The file is kept (sparse) as long as the map, at open and when it grows.
    config = JournalConfig(map_size_bytes=1 << 20, map_size_bytes_max=1 << 24, entry_batches="lmdb")
    journal = _open(tmp_path, config)
    data_file = tmp_path / "journal" / "data.mdb"
    try:
        assert data_file.stat().st_size >= journal.statistics().map_size_bytes == 1 << 20
        for number in range(40):  # 40 x 64 KiB: the map must grow past 1 MiB
            journal.append(P0, 7, transactional_batch(7, 2 * number, value_bytes=32 * 1024))
        grown = journal.statistics().map_size_bytes
        assert grown > 1 << 20
        assert data_file.stat().st_size >= grown
        assert data_file.stat().st_blocks * 512 < grown + (4 << 20)  # sparse: blocks in use only
    finally:
        journal.close()
