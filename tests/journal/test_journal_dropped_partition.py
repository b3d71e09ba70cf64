"""A partition dropped (its topic deleted) and created again under the same name gets a
new id in LMDB; a read that was in flight across the drop must not leave the old id
cached, or every later read of the new partition finds nothing."""

from __future__ import annotations

from pathlib import Path

from copier_support import transactional_batch

from twinlog.journal import CopyState, LocalJournal

P0 = "orders-0"


def test_a_read_in_flight_across_a_drop_does_not_cache_the_old_partition_id(
    tmp_path: Path,
) -> None:
    with LocalJournal.open(tmp_path / "journal") as journal:
        journal.append(P0, 1, transactional_batch(1, 0), sequence=0)
        # A reader's snapshot from before the drop, as another thread would hold it
        # while the topic is deleted; it looks the id up only after the drop.
        with journal._reading() as tables:
            journal.drop_partition(P0)
            journal._partition_id(tables, P0)
        journal.append(P0, 2, transactional_batch(2, 0), sequence=0)  # created again
        record = journal.transaction(P0, 2)
        assert record is not None and record.state is CopyState.OPEN
        assert list(journal.sequences(P0, 2)) == [0]
        journal.check()
