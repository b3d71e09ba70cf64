"""Records a replicated leader's ``commit_to`` queues for LMDB with no writer waiting (its
writer's wait failed, or the last term's after a promotion): one LMDB failed to apply (a
full disk) is applied again before the next write, instead of LMDB refusing every later
record as out of order."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from copier_support import replicated_leader_journal, transactional_batch

import twinlog.journal.journal_log as journal_log_module
from twinlog.engine.base import failpoints
from twinlog.engine.base.errors import NotEnoughReplicasAfterAppendError

P0 = "orders-0"


@pytest.fixture(autouse=True)
def _disarm():
    yield
    failpoints.disarm_all()


def test_an_unwaited_record_lmdb_failed_to_apply_is_applied_before_the_next_write(
    tmp_path: Path,
) -> None:
    committing = [False]
    journal = replicated_leader_journal(tmp_path, P0, committing)
    try:
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            journal.append(P0, 5, transactional_batch(5, 0))  # offset 0: its writer gave up
        failpoints.arm("journal.before_sync", "raise")  # LMDB cannot apply (a full disk)
        journal.commit_to(P0, 1)  # the replicas caught up: queued, nobody waits for it
        with contextlib.suppress(failpoints.FailpointError):
            journal.local.barrier()  # the failed group is over
        failpoints.disarm_all()
        assert journal.transaction(P0, 5) is None  # LMDB did not apply offset 0
        committing[0] = True
        journal.append(P0, 5, transactional_batch(5, 2))  # offset 1, after 0 applied again
        record = journal.transaction(P0, 5)
        assert record is not None and record.entry_count == 2
    finally:
        journal.close()


def test_a_commit_to_that_fails_part_way_is_finished_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records read from the log are queued in bounded rounds, each waited for: LMDB
    failing in one (a full disk) leaves the high watermark below what is committed, and
    the next ``commit_to`` repairs first, then queues the rest."""
    monkeypatch.setattr(journal_log_module, "REPLAY_PENDING_MAX", 2)
    committing = [False]
    journal = replicated_leader_journal(tmp_path, P0, committing)
    try:
        for sequence in range(4):  # offsets 0..3: their writers gave up
            with pytest.raises(NotEnoughReplicasAfterAppendError):
                journal.append(P0, 5, transactional_batch(5, sequence))
        failpoints.arm("journal.before_sync", "raise")  # LMDB cannot apply
        with pytest.raises(failpoints.FailpointError):
            journal.commit_to(P0, 4)  # the first round's wait fails
        failpoints.disarm_all()
        assert journal.high_watermark(P0) < 4 and journal.applicable_end(P0) == 4
        journal.commit_to(P0, 4)  # the replicas' next word: repaired, the rest queued
        journal.wait_applied()
        assert journal.high_watermark(P0) == 4
        record = journal.transaction(P0, 5)
        assert record is not None and record.entry_count == 4
    finally:
        journal.close()
