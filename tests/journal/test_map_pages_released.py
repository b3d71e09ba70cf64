"""A copy's read gives the map's pages back only when it read batches held in LMDB.

Batches kept inline in LMDB are read as views into the map, which would add them to the
process's resident set: those pages are released after each chunk. A batch kept in the
journal log maps only a few small LMDB pages; giving them back (an madvise over the whole
map, then faulting them in again on the next read) cost more than the rest of the read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from copier_support import transactional_batch

from twinlog.journal import JournalLogs, LocalJournal, mapped_pages

P0 = "orders-0"
TRANSACTION = 3


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file names whose mapped pages were released, in order."""
    released: list[str] = []

    def release(file_path: str, ranges: object = None) -> int:
        released.append(Path(file_path).name)
        return 0

    monkeypatch.setattr(mapped_pages, "release_mapped_pages", release)
    return released


@pytest.mark.parametrize(
    ("entry_batches", "released_after_read"), [("lmdb", 1), ("journal_log", 0)]
)
def test_pages_are_released_after_reading_batches_held_in_lmdb_only(
    tmp_path: Path, releases: list[str], entry_batches: str, released_after_read: int
) -> None:
    journal = JournalLogs(LocalJournal.open(tmp_path / "journal", entry_batches=entry_batches))
    try:
        journal.open_partition(P0, tmp_path / "logs" / P0)
        batch = transactional_batch(TRANSACTION, 0, value_bytes=4096)
        journal.append(P0, TRANSACTION, batch)
        sequences = journal.sequences(P0, TRANSACTION)
        releases.clear()
        read = [bytes(view) for view in journal.iter_batches(P0, sequences)]
        assert read == [batch]
        assert releases == ["data.mdb"] * released_after_read
    finally:
        journal.close()
