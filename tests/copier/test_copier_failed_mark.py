"""A copier whose journal-log mark failed (LMDB did not apply it, the record is in the
journal log): nothing reaches the data log before the failed mark is cut, so a crash
before the next journal write replays no mark that the data log contradicts."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from copier_support import PartitionFixture, body, log_bodies, plain_batch, transactional_batch

from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import DiskFullError
from twinlog.journal import CopyState


@pytest.fixture
def partition(tmp_path: Path):
    opened = PartitionFixture(tmp_path)
    yield opened
    opened.close()
    failpoints.disarm_all()


def test_a_failed_applying_mark_is_cut_before_a_plain_append_and_a_crash(
    partition: PartitionFixture,
) -> None:
    batches = [transactional_batch(7, 2 * i) for i in range(3)]
    partition.journal_transaction(7, batches)
    failpoints.arm("journal.before_sync", "raise")  # MARK_APPLYING is logged, LMDB fails
    with pytest.raises(failpoints.FailpointError):
        partition.writer.apply_commit(7)
    failpoints.disarm_all()
    assert partition.j.transaction(partition.name, 7).state is CopyState.OPEN
    partition.writer.append_plain(plain_batch(0))
    partition.restart()  # the journal log is replayed: a MARK_APPLYING left in it would
    # say the copy starts where the plain batch is (a foreign tail, refused at open)
    assert partition.j.transaction(partition.name, 7).state is CopyState.OPEN
    assert partition.writer.apply_commit(7) == (1, 7)
    assert log_bodies(partition.log) == [body(plain_batch(0))] + [body(b) for b in batches]
    partition.j.check()


def test_a_copy_failed_by_a_full_disk_ends_its_journal_read(partition: PartitionFixture) -> None:
    """The copy's append fails at its second batch (a full disk): the generator reading
    the batches from the journal is closed at once, its read transaction ended, so the
    journal can close (it waited for that read forever while the error was kept)."""
    batches = [transactional_batch(7, 2 * i) for i in range(3)]
    partition.journal_transaction(7, batches)
    failpoints.arm("log.before_write", "enospc", on_hit=2, times=1_000)
    with pytest.raises(DiskFullError) as failed:
        partition.writer.apply_commit(7)
    failpoints.disarm_all()
    readers = partition.journal.local._map_lock._readers  # while the error is kept
    del failed
    gc.collect()  # so that a leaked read ends and the fixture's close does not wait forever
    assert readers == 0
    assert partition.writer.apply_commit(7) == (0, 6)
    assert log_bodies(partition.log) == [body(b) for b in batches]
