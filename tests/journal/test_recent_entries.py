"""The ENTRY batches a leader journaled lately, kept in memory for the copy: what is kept
and for how long, that the copy's reads take them from there (not the journal log), and
that a cut of the journal log forgets what it cut before other records take its offsets."""

from __future__ import annotations

from pathlib import Path

import pytest
from copier_support import replicated_leader_journal, transactional_batch

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import NotEnoughReplicasAfterAppendError
from twinlog.journal import JournalLogs, LocalJournal
from twinlog.journal.journal_log import JournalLog
from twinlog.journal.recent_entries import ENTRY_OVERHEAD_BYTES, RecentEntries

P0 = "orders-0"
P1 = "orders-1"


@pytest.fixture(autouse=True)
def _disarm():
    yield
    failpoints.disarm_all()


def _open(tmp_path: Path) -> JournalLogs:
    opened = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    opened.open_partition(P0, tmp_path / "logs" / P0)
    return opened


def test_the_oldest_go_first_once_the_bytes_are_over_the_limit() -> None:
    each = 40 + ENTRY_OVERHEAD_BYTES  # what one 40-byte batch costs
    kept = RecentEntries(bytes_max=2 * each + 20)
    kept.put(P0, 0, 7, b"a" * 40)
    kept.put(P0, 1, 7, b"b" * 40)
    kept.put(P1, 0, 8, b"c" * 40)  # over the limit: the first goes
    assert kept.get(P0, 0) is None
    assert [bytes(kept.get(*key)[1]) for key in ((P0, 1), (P1, 0))] == [b"b" * 40, b"c" * 40]  # type: ignore[index]
    assert kept.kept_bytes == 2 * each
    kept.put(P0, 1, 9, b"d" * 10)  # the same offset again (after a cut): replaced
    assert kept.get(P0, 1) == (9, memoryview(b"d" * 10))
    assert kept.kept_bytes == each + 10 + ENTRY_OVERHEAD_BYTES
    kept.put(P0, 2, 7, b"e" * (2 * each))  # larger than the limit: not kept, nothing evicted
    assert kept.get(P0, 2) is None and kept.kept_bytes == each + 10 + ENTRY_OVERHEAD_BYTES
    kept.put(P0, 1, 9, bytearray(b"f" * 10))  # type: ignore[arg-type]  # not kept, and
    assert kept.get(P0, 1) is None  # what was kept at that offset is gone


def test_only_bytes_that_cannot_change_are_kept() -> None:
    kept = RecentEntries()
    reused = bytearray(b"x" * 10)
    kept.put(P0, 0, 7, reused)  # type: ignore[arg-type]
    kept.put(P0, 1, 7, memoryview(reused))
    kept.put(P0, 2, 7, memoryview(b"y" * 10)[2:])
    assert kept.get(P0, 0) is None and kept.get(P0, 1) is None
    assert kept.get(P0, 2) == (7, memoryview(b"y" * 8))


def test_a_cut_forgets_its_partitions_entries_from_the_cut_up() -> None:
    kept = RecentEntries()
    for offset in range(4):
        kept.put(P0, offset, 7, b"p0-%d" % offset)
        kept.put(P1, offset, 8, b"p1-%d" % offset)
    kept.forget_from(P0, 2)
    assert [kept.get(P0, offset) is not None for offset in range(4)] == [True, True, False, False]
    assert all(kept.get(P1, offset) is not None for offset in range(4))
    kept.forget_partition(P1)
    assert all(kept.get(P1, offset) is None for offset in range(4))
    assert kept.kept_bytes == 2 * (len(b"p0-0") + ENTRY_OVERHEAD_BYTES)


def test_the_copy_reads_batches_journaled_lately_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = [transactional_batch(5, 0), transactional_batch(5, 2)]
    read_back: list[int] = []
    logged_batch = JournalLog.logged_batch

    def counted(self: JournalLog, sequence: int) -> object:
        read_back.append(sequence)
        return logged_batch(self, sequence)

    monkeypatch.setattr(JournalLog, "logged_batch", counted)
    journal = _open(tmp_path)
    try:
        for batch in batches:
            journal.append(P0, 5, batch)
        sequences = journal.sequences(P0, 5)
        assert [bytes(b) for b in journal.iter_batches(P0, sequences)] == batches
        assert [h.base_sequence for h in journal.iter_batch_headers(P0, sequences)] == [0, 2]
        assert read_back == []  # from memory
    finally:
        journal.close()
    journal = _open(tmp_path)  # a restart: nothing in memory, the journal log is read
    try:
        sequences = journal.sequences(P0, 5)
        assert [bytes(b) for b in journal.iter_batches(P0, sequences)] == batches
        assert read_back == [0, 1]
    finally:
        journal.close()


def test_a_repair_forgets_the_entry_it_cut_and_keeps_the_one_appended_in_its_place(
    tmp_path: Path,
) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 5, transactional_batch(5, 0))
        failpoints.arm("journal_log.before_apply", "raise")
        with pytest.raises(failpoints.FailpointError):
            journal.append(P0, 6, transactional_batch(6, 0))  # record 1, never applied
        failpoints.disarm_all()
        assert journal.recent.get(P0, 1) is not None  # kept until the cut
        journal.mark_aborted(P0, 5)  # the next write cuts record 1 first, then takes 1
        assert journal.recent.get(P0, 1) is None
        replacement = transactional_batch(7, 0)
        assert journal.append(P0, 7, replacement) == 2
        assert [bytes(b) for b in journal.iter_batches(P0, journal.sequences(P0, 7))] == [
            replacement
        ]
        journal.check()


def test_a_closed_partition_keeps_nothing(tmp_path: Path) -> None:
    journal = _open(tmp_path)
    try:
        journal.append(P0, 5, transactional_batch(5, 0))
        assert journal.recent.kept_bytes > 0
        journal.close_partition(P0)
        assert journal.recent.kept_bytes == 0
    finally:
        journal.close()


def test_a_replicas_cuts_forget_what_they_cut(tmp_path: Path) -> None:
    """A replicated leader's uncommitted ENTRY, cut as a divergent suffix once it stepped
    down, is forgotten; a restart past the leader's start forgets the partition's all."""
    committing = [True]
    journal = replicated_leader_journal(tmp_path, P0, committing)
    try:
        journal.append(P0, 5, transactional_batch(5, 0))  # offset 0, committed
        committing[0] = False
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            journal.append(P0, 5, transactional_batch(5, 2))  # offset 1, never committed
        assert journal.recent.get(P0, 1) is not None
        journal.step_down(P0)
        journal.truncate(P0, 1)
        assert journal.recent.get(P0, 1) is None and journal.recent.get(P0, 0) is not None
        journal.restart_at(P0, 10)
        assert journal.recent.get(P0, 0) is None and journal.recent.kept_bytes == 0
    finally:
        journal.close()
