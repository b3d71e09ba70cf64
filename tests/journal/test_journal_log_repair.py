"""The repair of a journal log after a failed application: what it cuts, and what holds
for the records appended after it (they are made durable before LMDB applies them, and
a failure anywhere after the append is repaired before the next write)."""

from __future__ import annotations

from pathlib import Path

import pytest
from copier_support import transactional_batch

from twinlog.engine.base import failpoints
from twinlog.journal import JournalLogs, LocalJournal

P0 = "orders-0"


def _open(tmp_path: Path) -> JournalLogs:
    opened = JournalLogs(LocalJournal.open(tmp_path / "journal"))
    opened.open_partition(P0, tmp_path / "logs" / P0)
    return opened


@pytest.fixture(autouse=True)
def _disarm():
    yield
    failpoints.disarm_all()


def test_a_record_appended_after_a_repair_is_made_durable_before_it_is_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 5, transactional_batch(5, 0))
        # Record 1 is made durable (the log's durable end passes it), then LMDB fails.
        failpoints.arm("journal.before_sync", "raise")
        with pytest.raises(failpoints.FailpointError):
            journal.append(P0, 5, transactional_batch(5, 2))
        failpoints.disarm_all()
        journal_log = journal.journal_log(P0)
        flushed_ends: list[int] = []
        flush = journal_log.flush_beside_appends

        def spied_flush() -> int:
            flushed_ends.append(flush())
            return flushed_ends[-1]

        monkeypatch.setattr(journal_log, "flush_beside_appends", spied_flush)
        # The repair cuts record 1; the new record 1 is other bytes, not fsynced yet.
        assert journal.append(P0, 5, transactional_batch(5, 2)) == 1
        assert flushed_ends == [2], "record 1 was applied to LMDB without an fsync of its log"


def test_a_failure_between_the_append_and_the_queueing_is_repaired_before_the_next_write(
    tmp_path: Path,
) -> None:
    with _open(tmp_path) as journal:
        journal.append(P0, 5, transactional_batch(5, 0))
        failpoints.arm("journal_log.before_apply", "raise")
        with pytest.raises(failpoints.FailpointError):
            journal.append(P0, 5, transactional_batch(5, 2))
        failpoints.disarm_all()
        # Record 1 is in the log but never reached LMDB: cut, and the next write takes 1.
        assert journal.append(P0, 5, transactional_batch(5, 2)) == 1
        assert journal.journal_log(P0).log_end_offset == 2
        assert list(journal.sequences(P0, 5)) == [0, 1]
        journal.check()
