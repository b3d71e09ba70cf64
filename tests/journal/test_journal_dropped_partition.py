"""A partition dropped (its topic deleted) and created again under the same name gets a
new id in LMDB; a read that was in flight across the drop must not leave the old id
cached, or every later read of the new partition finds nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from copier_support import transactional_batch

from twinlog.journal import CopyState, JournalLogs, LocalJournal

P0 = "orders-0"


def test_a_read_in_flight_across_a_drop_does_not_cache_the_old_partition_id(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "logs" / P0
    with JournalLogs(LocalJournal.open(tmp_path / "journal")) as journal:
        local = journal.local
        journal.open_partition(P0, directory)
        journal.append(P0, 1, transactional_batch(1, 0))
        # A reader's snapshot from before the drop, as another thread would hold it
        # while the topic is deleted; it looks the id up only after the drop.
        with local._reading() as tables:
            journal.delete_partition(P0)
            local._partition_id(tables, P0)
        shutil.rmtree(directory)  # the broker removes the deleted partition's directory
        journal.open_partition(P0, directory)  # created again
        assert journal.append(P0, 2, transactional_batch(2, 0)) == 0
        record = journal.transaction(P0, 2)
        assert record is not None and record.state is CopyState.OPEN
        assert list(journal.sequences(P0, 2)) == [0]
        journal.check()
